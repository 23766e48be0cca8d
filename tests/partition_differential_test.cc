// The SPMD partitioner against the unpartitioned global-view program: a family of programs, with
// input and output shardings drawn at random (seeded) on meshes of 1 to 16 devices, must give the
// same results both ways (to f32 tolerance). Also: the seed matmul's partitioned program
// communicates no more bytes than the notebook's hand-written variant (c).
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "examples/seed_variants.h"
#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/printer.h"
#include "ir/sharding.h"
#include "passes/canonicalize.h"
#include "passes/sharding_propagation.h"
#include "passes/spmd/cost.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Dims = std::vector<int64_t>;

struct Family {
  std::string name;
  // The input shapes, from dims drawn for this case (each a multiple of 16).
  std::function<std::vector<Dims>(const std::function<int64_t()>& dim)> shapes;
  std::function<std::vector<Tracer>(const std::vector<Tracer>&)> fn;
  int rounds = 6;  // random shapes and layouts tried
};

// Program families; those with a shard_map name only the axis "x", which every mesh here has.
std::vector<Family> Families(const Mesh& mesh) {
  std::vector<Family> f;
  f.push_back({"matmul_chain",
               [](const auto& dim) {
                 int64_t m = dim(), k = dim(), n = dim(), p = dim();
                 return std::vector<Dims>{{m, k}, {k, n}, {n, p}};
               },
               [](const std::vector<Tracer>& a) {
                 return std::vector<Tracer>{jnp::matmul(jnp::matmul(a[0], a[1]), a[2])};
               }});
  f.push_back({"mlp",
               [](const auto& dim) {
                 int64_t m = dim(), d = dim(), h = dim();
                 return std::vector<Dims>{{m, d}, {d, h}, {h}, {h, d}};
               },
               [](const std::vector<Tracer>& a) {
                 Tracer hidden = lax::tanh(jnp::matmul(a[0], a[1]) + a[2]);
                 return std::vector<Tracer>{jnp::matmul(hidden, a[3])};
               }});
  f.push_back({"batched_dot_and_reductions",
               [](const auto& dim) {
                 int64_t b = dim(), m = dim(), k = dim();
                 return std::vector<Dims>{{b, m, k}, {b, k, m}};
               },
               [](const std::vector<Tracer>& a) {
                 Tracer prod = lax::dot_general(a[0], a[1], DotDims{{2}, {1}, {0}, {0}});
                 return std::vector<Tracer>{
                     lax::reduce_sum(prod, {1}), lax::reduce_max(a[0], {0, 2}),
                     lax::reduce_min(a[1], {1}), lax::reduce_sum(a[0], {0, 1, 2})};
               }});
  f.push_back({"reshapes_and_transposes",
               [](const auto& dim) {
                 int64_t a = dim(), b = dim(), c = dim();
                 return std::vector<Dims>{{a, b, c}, {c, a * b}};
               },
               [](const std::vector<Tracer>& a) {
                 const Dims& s = a[0].shape();
                 Tracer merged = lax::reshape(a[0], {s[0] * s[1], s[2]});         // merge
                 Tracer t = lax::transpose(merged, {1, 0}) * 2.0 + a[1];          // [c, a*b]
                 Tracer split = lax::reshape(t, {s[2], s[0], s[1]});              // split
                 Tracer back = lax::transpose(split, {1, 2, 0});                  // [a, b, c]
                 Tracer odd = lax::reshape(back, {s[0] * s[1] * s[2] / 16, 16});  // may replicate
                 return std::vector<Tracer>{back - a[0], lax::reduce_sum(odd, {1})};
               }});
  f.push_back({"elementwise_with_broadcasts",
               [](const auto& dim) {
                 int64_t m = dim(), n = dim();
                 return std::vector<Dims>{{m, n}, {n}, {m, 1}, {m, n}};
               },
               [](const std::vector<Tracer>& a) {
                 Tracer scaled = a[0] * a[1] - a[2];
                 Tracer picked = lax::select(scaled > a[3], lax::exp(a[3] * 0.5), lax::neg(scaled));
                 Tracer shifted = picked + lax::broadcasted_iota(DType::kF32, a[0].shape(), 1);
                 return std::vector<Tracer>{shifted, lax::max(a[0], a[3]) / (lax::abs(a[3]) + 1.0)};
               }});
  f.push_back({"constraints_slices_concat",
               [](const auto& dim) {
                 int64_t m = dim(), n = dim();
                 return std::vector<Dims>{{m, n}, {n, m}};
               },
               [](const std::vector<Tracer>& a) {
                 const Dims& s = a[0].shape();
                 Tracer c = lax::with_sharding_constraint(jnp::matmul(a[0], a[1]), P(None, "x"));
                 Tracer top = lax::slice(c, {0, 0}, {s[0] / 2, s[0]});
                 Tracer rows = lax::dynamic_slice(c, {s[0] / 4, 0}, {s[0] / 2, s[0]});
                 Tracer both = lax::concatenate({top, rows}, 0);
                 Tracer cols = lax::concatenate({a[0], a[0] * 3.0}, 1);
                 return std::vector<Tracer>{both + c, lax::tanh(cols)};
               }});
  f.push_back({"fori_loop_tanh_matmul",
               [](const auto& dim) {
                 int64_t m = dim(), d = dim();
                 return std::vector<Dims>{{m, d}, {d, d}, {d}};
               },
               [](const std::vector<Tracer>& a) {
                 // x = tanh(x @ w + i * b / 8) three times, and a two-carry loop.
                 Tracer w = a[1] * 0.25, b = a[2];
                 Tracer x = lax::fori_loop(
                     0, 3,
                     [&](Tracer i, Tracer x) {
                       return lax::tanh(jnp::matmul(x, w) +
                                        lax::convert_element_type(i, DType::kF32) * b / 8.0);
                     },
                     a[0]);
                 std::vector<Tracer> pair = lax::fori_loop(
                     1, 3,
                     [&](Tracer, std::vector<Tracer> c) {
                       return std::vector<Tracer>{c[0] + c[1], lax::transpose(c[1], {1, 0}) * 0.5};
                     },
                     {a[1], w});
                 return std::vector<Tracer>{x, pair[0], pair[1]};
               }});
  f.push_back({"ordering_scans_padding",
               [](const auto& dim) {
                 int64_t m = dim(), n = dim();
                 return std::vector<Dims>{{m, n}, {m, n}};
               },
               [](const std::vector<Tracer>& a) {
                 auto [top, index] = lax::top_k(a[0], 3);
                 auto f32 = [](Tracer t) { return lax::convert_element_type(t, DType::kF32); };
                 Tracer bounded = lax::clamp(-1.1, a[1], 1.1);
                 return std::vector<Tracer>{
                     top + f32(index),
                     lax::sort(a[0], 0) - lax::cumsum(a[1], 1, /*reverse=*/true),
                     lax::broadcast_in_dim(f32(lax::argmax(a[1], 1)), a[1].shape(), {0}) +
                         f32(jnp::argsort(a[0], 0)) * 0.5,
                     lax::cummax(a[1], 0) * lax::rev(a[0], {0, 1}),
                     lax::pad(a[0], 0.5, {{1, 2, 0}, {0, 0, 0}}),
                     lax::reduce_prod(bounded, {1})};
               }});
  f.push_back({"gather_scatter",
               [](const auto& dim) {
                 int64_t v = dim(), d = dim(), t = dim();
                 return std::vector<Dims>{{v, d}, {t}};
               },
               [](const std::vector<Tracer>& a) {
                 // Ids in [0, v) from the data; rows looked up, then added back.
                 const int64_t v = a[0].shape()[0], t = a[1].shape()[0];
                 Tracer ids = lax::rem(
                     lax::convert_element_type(lax::floor(lax::abs(a[1]) * 7.0), DType::kS32),
                     lax::full({t}, static_cast<double>(v), DType::kS32));
                 Tracer rows = jnp::take(a[0], ids, 0);
                 Tracer grad = lax::scatter_add(lax::full(a[0].shape(), 0, DType::kF32),
                                                lax::reshape(ids, {t, 1}), lax::tanh(rows),
                                                {.update_window_dims = {1},
                                                 .inserted_window_dims = {0},
                                                 .scatter_dims_to_operand_dims = {0}});
                 return std::vector<Tracer>{rows * 2.0, grad + a[0]};
               }});
  // The math, bit, selection and indexing primitives, a few per program (the plan search of
  // sharding-propagation, which ExpectNoWorseThanAlternatives checks, is bounded).
  auto two_matrices = [](const auto& dim) {
    int64_t m = dim(), n = dim();
    return std::vector<Dims>{{m, n}, {m, n}};
  };
  f.push_back({"transcendental", two_matrices, [](const std::vector<Tracer>& a) {
                 Tracer small = lax::clamp(-0.9, a[0], 0.9);
                 return std::vector<Tracer>{
                     lax::sin(a[0]) + lax::cos(a[1]) * lax::tan(small),
                     lax::erf_inv(small) + lax::atan2(a[0], a[1]) + lax::erf(a[1])};
               },
               3});
  f.push_back({"rounding_and_powers", two_matrices, [](const std::vector<Tracer>& a) {
                 Tracer small = lax::clamp(-1.2, a[0], 1.2);
                 return std::vector<Tracer>{
                     lax::floor(a[0]) * lax::ceil(a[1]) + lax::round(a[1] * 3.0) + lax::sign(a[0]),
                     lax::integer_pow(small, 3) + lax::pow(lax::abs(a[1]) + 1.0, small) +
                         lax::expm1(small) * lax::log1p(lax::abs(a[0]))};
               },
               3});
  f.push_back({"bits", two_matrices, [](const std::vector<Tracer>& a) {
                 Tracer i = lax::convert_element_type(lax::floor(a[0] * 100.0), DType::kS32);
                 Tracer j = lax::convert_element_type(lax::floor(a[1] * 100.0), DType::kS32);
                 Tracer three = lax::full(i.shape(), 3, DType::kS32);
                 Tracer mixed =
                     lax::bitwise_xor(lax::bitwise_and(i, j), lax::bitwise_or(i, three)) +
                     lax::bitwise_not(j) + lax::population_count(i);
                 Tracer shifted = lax::shift_left(i, three) + lax::shift_right_logical(j, three) +
                                  lax::shift_right_arithmetic(i, three);
                 return std::vector<Tracer>{lax::convert_element_type(mixed, DType::kF32),
                                            lax::convert_element_type(shifted, DType::kF32)};
               },
               3});
  f.push_back({"selection_and_switch", two_matrices, [](const std::vector<Tracer>& a) {
                 auto [keys, carried] = lax::sort_key_val(a[0], a[1], 0);
                 // The branch picked by the data.
                 Tracer index = lax::convert_element_type(
                     lax::floor(lax::reduce_max(lax::abs(a[1]), {0, 1})), DType::kS32);
                 Tracer picked = lax::switch_(
                     index,
                     {[](std::vector<Tracer> v) { return std::vector<Tracer>{v[0] * 2.0}; },
                      [](std::vector<Tracer> v) {
                        return std::vector<Tracer>{lax::cumprod(lax::clamp(0.5, v[0], 1.5), 1)};
                      },
                      [](std::vector<Tracer> v) {
                        return std::vector<Tracer>{lax::cummin(v[0], 0, /*reverse=*/true)};
                      }},
                     {a[0]})[0];
                 Tracer argmin = lax::convert_element_type(lax::argmin(a[1], 1), DType::kF32);
                 return std::vector<Tracer>{
                     keys + carried, picked + lax::broadcast_in_dim(argmin, a[1].shape(), {0})};
               },
               3});
  f.push_back({"scatter_gather_modes_random", two_matrices, [](const std::vector<Tracer>& a) {
                 // Rows 0..m/2 replaced by the last rows reversed; rows 2i gathered, those past
                 // the end filled (FILL_OR_DROP) or clamped (CLIP); uniform noise.
                 const int64_t m = a[0].shape()[0], n = a[0].shape()[1];
                 Tracer rows = lax::slice(lax::rev(a[1], {0}), {0, 0}, {m / 2, n});
                 Tracer ids = lax::broadcasted_iota(DType::kS32, {m / 2, 1}, 0);
                 Tracer scattered = lax::scatter(a[0], ids, rows,
                                                 {.update_window_dims = {1},
                                                  .inserted_window_dims = {0},
                                                  .scatter_dims_to_operand_dims = {0}});
                 Tracer every_other = lax::broadcasted_iota(DType::kS32, {m, 1}, 0) * 2;
                 auto take = [&](lax::GatherScatterMode mode) {
                   return lax::gather(a[0], every_other,
                                      {.offset_dims = {1}, .collapsed_slice_dims = {0},
                                       .start_index_map = {0}},
                                      {1, n}, mode, 0.5);
                 };
                 Tracer noise = random::uniform(random::prng_key(7), a[0].shape());
                 return std::vector<Tracer>{
                     scattered,
                     take(lax::GatherScatterMode::kFillOrDrop) -
                         take(lax::GatherScatterMode::kClip) + noise};
               },
               3});
  f.push_back({"while_and_cond",
               [](const auto& dim) {
                 int64_t m = dim(), n = dim();
                 return std::vector<Dims>{{m, n}, {n}};
               },
               [](const std::vector<Tracer>& a) {
                 Tracer bias = a[1] * 0.1;
                 Tracer grown = lax::while_loop(
                     [](Tracer c) {
                       return lax::reduce_max(lax::abs(c), {0, 1}) <
                              lax::scalar(20, DType::kF32);
                     },
                     [&](Tracer c) {
                       return c * 1.5 + lax::broadcast_in_dim(bias, c.shape(), {1});
                     },
                     a[0]);
                 Tracer chosen = lax::cond(
                     lax::reduce_sum(grown, {0, 1}) > lax::scalar(0, DType::kF32),
                     [](Tracer x) { return lax::cumsum(x, 1); }, [](Tracer x) { return -x; },
                     grown);
                 return std::vector<Tracer>{chosen, grown * 0.5};
               }});
  f.push_back({"shard_map_psum_then_bias",
               [](const auto& dim) {
                 int64_t m = dim(), k = dim(), n = dim();
                 return std::vector<Dims>{{m, k}, {k, n}, {n}};
               },
               [mesh](const std::vector<Tracer>& a) {
                 // A partial matmul per x block, summed by psum (out_spec P(): replicated), and
                 // the local rows of the input (out_spec P(x)): a two-result shard_map.
                 auto body = [](Tracer x, Tracer w) {
                   return std::vector<Tracer>{lax::psum(jnp::matmul(x, w), "x"), x};
                 };
                 std::vector<Tracer> s =
                     shard_map(body, mesh, {P(None, "x"), P("x")}, {P(), P(None, "x")})(
                         a[0] * 2.0, a[1]);
                 return std::vector<Tracer>{lax::tanh(s[0] + a[2]), s[1] - a[0]};
               }});
  return f;
}

// A random layout of an array of `dims` on `mesh`: each axis is used at most once, and a dim is
// only split by axes whose product divides it.
PartitionSpec RandomSpec(std::mt19937& rng, const ir::Mesh& mesh, const Dims& dims) {
  std::vector<std::string> axes;
  for (const ir::MeshAxis& a : mesh.axes()) axes.push_back(a.name());
  std::shuffle(axes.begin(), axes.end(), rng);
  ir::PartitionSpec spec;
  size_t next = 0;
  for (int64_t d : dims) {
    ir::DimSpec* dim = spec.add_dims();
    int64_t blocks = 1;
    int take = std::uniform_int_distribution<int>(0, 2)(rng);
    for (; take > 0 && next < axes.size(); --take, ++next) {
      int64_t size = mesh.axes(ir::MeshAxisIndex(mesh, axes[next])).size();
      if (d % (blocks * size) != 0) break;
      blocks *= size;
      dim->add_axes(axes[next]);
    }
  }
  return PartitionSpec(spec);
}

// The plan sharding-propagation chooses for `traced` (canonicalized first, as in the pipeline)
// is estimated by the machine model no slower, once partitioned, than the propagated plan and
// than each plan the rules can produce by laying out one op's result otherwise, everything else
// propagated around it.
void ExpectNoWorseThanAlternatives(const ir::Module& traced, const std::string& what) {
  ir::Module input = traced;
  ASSERT_TRUE(passes::Canonicalize().Run(input).ok()) << what;
  if (input.view() != ir::GLOBAL) return;
  ir::Module chosen = input;
  absl::StatusOr<bool> changed = passes::ShardingPropagation().Run(chosen);
  ASSERT_TRUE(changed.ok()) << what << ": " << changed.status();
  if (!*changed) return;
  absl::StatusOr<double> chosen_seconds = passes::EstimatePlanSeconds(chosen);
  ASSERT_TRUE(chosen_seconds.ok()) << what << ": " << chosen_seconds.status();
  ir::Module propagated = input;
  ASSERT_TRUE(passes::PropagateShardings(propagated, {}).ok()) << what;
  std::vector<std::pair<int64_t, passes::spmd::Spec>> alternatives =
      passes::AlternativeLayouts(propagated);
  std::vector<std::optional<std::pair<int64_t, passes::spmd::Spec>>> plans = {std::nullopt};
  for (auto& alternative : alternatives) plans.push_back(alternative);
  for (const auto& plan : plans) {
    ir::Module other = input;
    std::map<int64_t, passes::spmd::Spec> forced;
    if (plan) forced.insert(*plan);
    if (!passes::PropagateShardings(other, forced).ok()) continue;
    absl::StatusOr<double> seconds = passes::EstimatePlanSeconds(other);
    if (!seconds.ok()) continue;
    EXPECT_LE(*chosen_seconds, *seconds * (1 + 1e-9))
        << what << ": the plan with value " << (plan ? plan->first : -1) << " laid out "
        << (plan ? plan->second.ToString() : std::string("as propagated"))
        << " is estimated faster";
  }
}

struct MeshShape {
  std::vector<std::pair<std::string, int64_t>> axes;
  std::string name;
};

class PartitionDifferentialTest : public ::testing::TestWithParam<MeshShape> {};

TEST_P(PartitionDifferentialTest, PartitionedMatchesUnpartitioned) {
  const MeshShape& shape = GetParam();
  int64_t devices = 1;
  for (const auto& [name, size] : shape.axes) devices *= size;
  Runtime rt({.num_devices = static_cast<int>(devices)});
  Mesh mesh = *make_mesh(rt, shape.axes);
  std::mt19937 rng(1234 + devices);
  int partitioned = 0, cases = 0;
  for (const Family& family : Families(mesh)) {
    for (int round = 0; round < family.rounds; ++round) {
      auto dim = [&] { return 16 * std::uniform_int_distribution<int64_t>(1, 3)(rng); };
      std::vector<Dims> shapes = family.shapes(dim);
      std::vector<Array> args;
      std::string what = family.name + " round " + std::to_string(round) + ":";
      for (size_t i = 0; i < shapes.size(); ++i) {
        PartitionSpec spec = RandomSpec(rng, mesh.proto(), shapes[i]);
        Tensor host = *random::normal(random::key(rng()), shapes[i]);
        args.push_back(*device_put(host, NamedSharding(mesh, spec)));
        what += " " + ir::ShapedType{DType::kF32, shapes[i]}.ToString() + spec.to_string();
      }
      // The result types, from an unpartitioned trace, give the out_shardings their ranks.
      auto global = jit(family.fn, {.name = family.name,
                                    .pipeline = {.disabled = {"spmd-partition"}}});
      absl::StatusOr<std::vector<Array>> want = global.call(args);
      ASSERT_TRUE(want.ok()) << what << ": " << want.status();
      std::vector<PartitionSpec> out_specs;
      for (const Array& r : *want) {
        out_specs.push_back(RandomSpec(rng, mesh.proto(), r.type().dims));
        what += " -> " + r.type().ToString() + out_specs.back().to_string();
      }
      auto spmd = jit(family.fn, {.name = family.name, .out_shardings = out_specs});
      auto lowered = spmd.lower(args);
      ASSERT_TRUE(lowered.ok()) << what << ": " << lowered.status();
      ExpectNoWorseThanAlternatives(lowered->traced_module(), what);
      ++cases;
      if (lowered->module().view() == ir::PER_DEVICE) ++partitioned;
      absl::StatusOr<std::vector<Array>> got = spmd.call(args);
      ASSERT_TRUE(got.ok()) << what << ": " << got.status() << "\n" << lowered->as_text();
      ASSERT_EQ(got->size(), want->size());
      for (size_t r = 0; r < got->size(); ++r) {
        EXPECT_EQ((*got)[r].sharding().spec(), out_specs[r]) << what;
        std::vector<double> g = (*got)[r].to_host()->ToDoubles();
        std::vector<double> w = (*want)[r].to_host()->ToDoubles();
        ASSERT_EQ(g.size(), w.size()) << what;
        for (size_t i = 0; i < g.size(); ++i) {
          ASSERT_NEAR(g[i], w[i], 1e-3 + 1e-4 * std::abs(w[i]))
              << what << " result " << r << " element " << i << "\n" << lowered->as_text();
        }
      }
    }
  }
  // Every program here has partitioning rules for all its ops.
  EXPECT_EQ(partitioned, cases);
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, PartitionDifferentialTest,
    ::testing::Values(MeshShape{{{"x", 1}}, "x1"}, MeshShape{{{"x", 2}}, "x2"},
                      MeshShape{{{"x", 4}}, "x4"}, MeshShape{{{"x", 2}, {"y", 2}}, "x2y2"},
                      MeshShape{{{"x", 4}, {"y", 4}}, "x4y4"},
                      MeshShape{{{"x", 1}, {"y", 8}}, "x1y8"},
                      MeshShape{{{"x", 8}, {"y", 1}}, "x8y1"}),
    [](const ::testing::TestParamInfo<MeshShape>& info) { return info.param.name; });

TEST(ShardingConstraintTest, LaysOutTheValueAndChecksTheSpec) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  Tensor host = *random::normal(random::key(5), {4, 6});
  Array a = *device_put(host, NamedSharding(mesh, P("x", None)));
  auto f = jit([](Tracer a) { return lax::with_sharding_constraint(a * 2.0, P(None, "x")) + 1.0; },
               {.out_shardings = std::vector<PartitionSpec>{P(None, "x")}});
  auto lowered = f.lower(a);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  // The constraint moves x from rows to columns: one all_to_all, no gather.
  EXPECT_THAT(lowered->as_text(), HasSubstr("all_to_all[axes=(x) split_axis=1 concat_axis=0"));
  EXPECT_THAT(lowered->as_text(), Not(HasSubstr("all_gather")));
  absl::StatusOr<Array> out = f(a);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> want = host.ToDoubles(), got = out->to_host()->ToDoubles();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i] * 2 + 1, 1e-6);

  auto bad = jit([](Tracer a) { return lax::with_sharding_constraint(a, P("z")); });
  absl::StatusOr<Array> error = bad(a);
  ASSERT_FALSE(error.ok());
  EXPECT_THAT(std::string(error.status().message()),
              HasSubstr("with_sharding_constraint: sharding: axis \"z\" of spec P(z) is not in "
                        "mesh {x:2}"));
}

// The partitioned seed program communicates no more than the hand-written variant (c), both as
// written (collective-fusion off) and as compiled (fusion on both: the block of w each device
// needs is fetched directly, and the bf16 partial sums travel in f32).
TEST(SeedMatmulTest, CommunicatesNoMoreThanTheHandWrittenVariantC) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  std::vector<ShapedType> types = {{DType::kBF16, {2048, 2048}}, {DType::kBF16, {2048, 1024}}};
  std::vector<NamedSharding> shardings = {NamedSharding(mesh, P("x", "y")),
                                          NamedSharding(mesh, P("x", None))};
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "collective-fusion on" : "collective-fusion off");
    std::set<std::string> disabled;
    if (!fused) disabled.insert("collective-fusion");
    JitOptions options{.name = "seed_matmul",
                       .out_shardings = std::vector<PartitionSpec>{P("x", None)}};
    options.pipeline.disabled = disabled;
    auto f = jit([](Tracer x, Tracer w) { return jnp::matmul(x, w); }, options);
    auto lowered = f.lower(types, shardings);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    ASSERT_EQ(lowered->module().view(), ir::PER_DEVICE) << lowered->as_text();
    int64_t variant_c = -1;
    for (examples::SeedVariant& v : examples::SeedVariants(mesh, 2048, DefaultBackend(), disabled)) {
      if (v.name != "c") continue;
      auto c = v.program.lower(types, shardings);
      ASSERT_TRUE(c.ok()) << c.status();
      variant_c = passes::spmd::CommunicatedBytes(c->module());
      absl::StatusOr<passes::CostReport> cost = c->cost_analysis();
      ASSERT_TRUE(cost.ok()) << cost.status();
      if (!fused) {
        // Ring volumes (passes/cost_analysis.h): all_gather (1/2) * 4 MiB, psum 2 * (1/2) * 2 MiB.
        EXPECT_EQ(cost->flops, int64_t{2} * 1024 * 1024 * 1024);
        EXPECT_EQ(cost->bytes_communicated, 4 << 20);
      }
    }
    // Off: all_gather of w over x: 4 MiB out - 2 MiB in; psum over y of bf16[1024,1024]: 2 MiB.
    // On: the 2 MiB block of w; psum over y of f32[1024,1024]: 4 MiB.
    EXPECT_EQ(variant_c, fused ? 6 << 20 : 4 << 20);
    EXPECT_LE(passes::spmd::CommunicatedBytes(lowered->module()), variant_c);
    EXPECT_THAT(lowered->as_text(), HasSubstr("psum[axes=(y)]"));
  }
}

}  // namespace
}  // namespace shardjit
