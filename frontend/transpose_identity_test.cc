// Every transpose rule against the dot-product identity <J v, w> = <v, J^T w> (jvp against vjp),
// in f64 on both backends: the linear primitives over several shapes and dimension attributes,
// and every collective inside shard_map on 2x2 with one axis, tuple axes and axis_index_groups
// (the inner products summed over the devices).
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "frontend/shardjit.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

using Fn = std::function<Tracer(Tracer)>;

struct Case {
  std::string name;
  std::vector<int64_t> shape;
  Fn f;
};

std::vector<double> Values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

int64_t Count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Tracer Dot(Tracer a, Tracer b) {
  std::vector<int64_t> axes(a.rank());
  for (int64_t i = 0; i < a.rank(); ++i) axes[i] = i;
  return lax::reduce_sum(a * b, axes);
}

// (<J v, w>, <v, J^T w>) of f at x; w, of f's result type, has varied values that `seed` and
// `phase` (a scalar: the device's index inside shard_map, so that w differs between devices)
// shift (sin of the flat index: the trace has no host data here).
std::vector<Tracer> BothSides(const Fn& f, Tracer x, Tracer v, uint32_t seed,
                              Tracer phase = Tracer()) {
  JvpOut j = jvp([&](Tracer a) { return f(a); }, {x}, {v});
  const Tracer y = j.tangents_out[0];
  Tracer flat = lax::convert_element_type(
      lax::broadcasted_iota(DType::kS32, {Count(y.shape())}, 0), y.dtype());
  Tracer angle = flat * 1.7 + static_cast<double>(seed % 7);
  if (phase.valid()) {
    angle = angle + lax::broadcast_in_dim(lax::convert_element_type(phase, y.dtype()),
                                          angle.shape(), {}) * 2.3;
  }
  Tracer w = lax::reshape(lax::sin(angle), y.shape());
  VjpOut p = vjp([&](Tracer a) { return f(a); }, {x});
  Tracer g = p.pullback({w})[0];
  return {Dot(y, w), Dot(v, g)};
}

class TransposeIdentityTest : public ::testing::TestWithParam<Backend> {};

TEST_P(TransposeIdentityTest, LinearPrimitives) {
  std::vector<Case> cases = {
      {"reduce_sum", {3, 4, 5}, [](Tracer x) { return lax::reduce_sum(x, {0, 2}); }},
      {"broadcast", {3, 1}, [](Tracer x) { return lax::broadcast_in_dim(x, {2, 3, 4}, {1, 2}); }},
      {"reshape", {4, 6}, [](Tracer x) { return lax::reshape(x, {2, 3, 4}); }},
      {"transpose", {2, 3, 4}, [](Tracer x) { return lax::transpose(x, {2, 0, 1}); }},
      {"rev", {3, 5}, [](Tracer x) { return lax::rev(x, {0, 1}); }},
      {"slice", {7, 9}, [](Tracer x) { return lax::slice(x, {1, 2}, {7, 9}, {3, 2}); }},
      {"pad", {4, 5}, [](Tracer x) { return lax::pad(x, 0.0, {{-1, 2, 2}, {3, -2, 0}}); }},
      {"concatenate", {3, 2}, [](Tracer x) { return lax::concatenate({x, x * 2.0, x}, 1); }},
      {"dynamic_slice", {6, 5}, [](Tracer x) { return lax::dynamic_slice(x, {4, -2}, {3, 2}); }},
      {"dynamic_update_slice", {6, 5},
       [](Tracer x) { return lax::dynamic_update_slice(x, lax::slice(x, {0, 0}, {2, 3}), {3, 1}); }},
      {"gather", {7, 3},
       [](Tracer x) {
         return jnp::take(x, lax::convert_element_type(
                                 lax::rem(lax::broadcasted_iota(DType::kS32, {9}, 0) * 5,
                                          lax::full({}, 8, DType::kS32)),
                                 DType::kS32),
                          0, lax::GatherScatterMode::kClip);
       }},
      {"scatter_add", {6, 3},
       [](Tracer x) {
         Tracer ids = lax::reshape(
             lax::rem(lax::broadcasted_iota(DType::kS32, {6}, 0) * 2, lax::full({}, 4, DType::kS32)),
             {6, 1});
         return lax::scatter_add(lax::full({4, 3}, 0.0, DType::kF64), ids, x,
                                 {.update_window_dims = {1},
                                  .inserted_window_dims = {0},
                                  .scatter_dims_to_operand_dims = {0}});
       }},
      {"cumsum", {4, 5}, [](Tracer x) { return lax::cumsum(x, 1, /*reverse=*/true); }},
      {"dot_general", {2, 3, 4},
       [](Tracer x) {
         return lax::dot_general(x, x * x + 1.0, {.lhs_contracting = {2, 1},
                                                  .rhs_contracting = {2, 1},
                                                  .lhs_batch = {},
                                                  .rhs_batch = {}});
       }},
      {"batched_dot", {2, 3, 4},
       [](Tracer x) {
         return lax::dot_general(lax::sin(x), x, {.lhs_contracting = {1},
                                                  .rhs_contracting = {1},
                                                  .lhs_batch = {0},
                                                  .rhs_batch = {0}});
       }},
      {"convert", {5}, [](Tracer x) { return lax::convert_element_type(x, DType::kF32); }},
      {"with_sharding_constraint", {3, 4},
       [](Tracer x) { return lax::with_sharding_constraint(x * 2.0, P()); }},
      {"select", {6}, [](Tracer x) { return lax::select(x > x * x, x * 3.0, -x); }},
      {"sort_top_k", {3, 6},
       [](Tracer x) {
         auto [top, index] = lax::top_k(lax::sort(x, 1) + x, 2);
         return top;
       }},
  };
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t n = Count(c.shape);
    Array x = *device_put(HostTensor(DType::kF64, c.shape, Values(n, seed++)),
                          NamedSharding(mesh, P()));
    Array v = *device_put(HostTensor(DType::kF64, c.shape, Values(n, seed++)),
                          NamedSharding(mesh, P()));
    absl::StatusOr<std::vector<Array>> out = jit(
        [&](Tracer x, Tracer v) { return BothSides(c.f, x, v, seed); },
        {.backend = GetParam()})(x, v);
    ASSERT_TRUE(out.ok()) << out.status();
    const double left = (*out)[0].to_host()->GetDouble(0);
    const double right = (*out)[1].to_host()->GetDouble(0);
    // f32 for the convert case, f64 otherwise.
    EXPECT_NEAR(left, right, 1e-6 * (1 + std::abs(left)));
    EXPECT_NE(left, 0.0);
  }
}

TEST_P(TransposeIdentityTest, CollectivesOnTuplesAndGroups) {
  const std::vector<std::vector<int64_t>> pairs = {{0, 1}, {2, 3}};
  std::vector<Case> cases = {
      {"psum_xy", {2, 3}, [](Tracer x) { return lax::psum(x * x, {"x", "y"}); }},
      {"psum_groups", {2, 3},
       [&](Tracer x) { return lax::psum(lax::sin(x), {"x", "y"}, pairs); }},
      {"pmean", {2, 3}, [](Tracer x) { return lax::pmean(x, "y") * x; }},
      {"all_gather_tiled", {2, 3}, [](Tracer x) { return lax::all_gather(x, {"x", "y"}, 1, true); }},
      {"all_gather_groups", {2, 3},
       [&](Tracer x) { return lax::all_gather(x * x, {"x", "y"}, 0, false, pairs); }},
      {"psum_scatter", {4, 3}, [](Tracer x) { return lax::psum_scatter(x, {"x", "y"}, 0, true); }},
      {"psum_scatter_groups", {2, 3},
       [&](Tracer x) { return lax::psum_scatter(x, {"x", "y"}, 0, false, pairs); }},
      {"ppermute", {2, 3},
       [](Tracer x) { return lax::ppermute(x, {"x", "y"}, {{0, 2}, {2, 3}, {3, 1}, {1, 0}}); }},
      {"all_to_all", {4, 2}, [](Tracer x) { return lax::all_to_all(x, {"x", "y"}, 0, 1, true); }},
      {"pbroadcast", {2, 3}, [](Tracer x) { return lax::pbroadcast(x * 2.0, "x", 1); }},
      // One row to every device, written at row 2 * (sender's index): the odd rows of the
      // output keep its values (here 2x), linear in x through both operand and output.
      {"ragged_all_to_all", {8, 3},
       [](Tracer x) {
         Tracer rows = lax::broadcasted_iota(DType::kS32, {4}, 0) * 2;
         Tracer ones = lax::full({4}, 1, DType::kS32);
         Tracer at = lax::broadcast_in_dim(lax::axis_index({"x", "y"}) * 2, {4}, {});
         return lax::ragged_all_to_all(x, x * 2.0, rows, ones, at, ones, {"x", "y"});
       }},
  };
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  uint32_t seed = 100;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<int64_t> global = c.shape;
    global[0] *= 4;  // the local blocks stacked over (x, y)
    const int64_t n = Count(global);
    Array x = *device_put(HostTensor(DType::kF64, global, Values(n, seed++)),
                          NamedSharding(mesh, P(Axes{"x", "y"})));
    Array v = *device_put(HostTensor(DType::kF64, global, Values(n, seed++)),
                          NamedSharding(mesh, P(Axes{"x", "y"})));
    auto body = [&](Tracer x, Tracer v) {
      std::vector<Tracer> sides = BothSides(c.f, x, v, seed, lax::axis_index({"x", "y"}));
      return std::vector<Tracer>{lax::psum(sides[0], {"x", "y"}), lax::psum(sides[1], {"x", "y"})};
    };
    absl::StatusOr<std::vector<Array>> out =
        jit(shard_map(body, mesh, {P(Axes{"x", "y"}), P(Axes{"x", "y"})}, {P(), P()}, /*check_vma=*/false),
            {.backend = GetParam()})(x, v);
    ASSERT_TRUE(out.ok()) << out.status();
    const double left = (*out)[0].to_host()->GetDouble(0);
    const double right = (*out)[1].to_host()->GetDouble(0);
    EXPECT_NEAR(left, right, 1e-9 * (1 + std::abs(left)));
    EXPECT_NE(left, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, TransposeIdentityTest,
                         ::testing::Values(Backend::kX86, Backend::kReference),
                         [](const auto& info) { return AbslUnparseFlag(info.param); });

}  // namespace
}  // namespace shardjit
