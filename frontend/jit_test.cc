// jit end to end: the north-star program, caching, lowering text, global-view programs
// (with and without shard_map inside), fori_loop and broadcasting, against host oracles.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "fmt/format.h"
#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ir.pb.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// out[m, n] = x[m, k] @ w[k, n] in double precision.
std::vector<double> MatmulOracle(const Tensor& x, const Tensor& w) {
  int64_t m = x.dims()[0], k = x.dims()[1], n = w.dims()[1];
  std::vector<double> xd = x.ToDoubles(), wd = w.ToDoubles(), out(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) out[i * n + j] += xd[i * k + p] * wd[p * n + j];
    }
  }
  return out;
}

void ExpectNear(const Tensor& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.num_elements(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got.GetDouble(i), want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
  }
}

class NorthStarTest : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(NorthStarTest, Matmul3MatchesF64) {
  auto [sx, sy] = GetParam();
  Runtime rt({.num_devices = static_cast<int>(sx * sy)});
  Mesh mesh = *make_mesh(rt, {{"x", sx}, {"y", sy}});
  const int64_t m = 24, k = 40, n = 12;
  Tensor x_host = *random::normal(random::key(1), {m, k}, DType::kBF16);
  Tensor w_host = *random::normal(random::key(2), {k, n}, DType::kBF16);
  Array x = *device_put(x_host, NamedSharding(mesh, P("x", "y")));
  Array w = *device_put(w_host, NamedSharding(mesh, P("x", None)));
  const int64_t k_per_y = k / sy;
  auto matmul3 = jit(shard_map(
      [k_per_y, n](Tracer x, Tracer w) {
        Tracer w_full = lax::all_gather(w, "x", /*axis=*/0, /*tiled=*/true);
        Tracer w_slice = lax::dynamic_slice(
            w_full, {lax::axis_index("y") * k_per_y, 0}, {k_per_y, n});
        return lax::psum(lax::dot_general(x, w_slice, DotDims{{1}, {0}}, DType::kF32), "y");
      },
      mesh, {P("x", "y"), P("x", None)}, {P("x", None)}));
  absl::StatusOr<Array> out = matmul3(x, w);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->type(), (ShapedType{DType::kF32, {m, n}}));
  EXPECT_EQ(out->sharding().spec(), P("x", None));
  ExpectNear(*out->to_host(), MatmulOracle(x_host, w_host), 1e-5);

  auto lowered = matmul3.lower(x, w);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  std::string text = lowered->as_text();
  EXPECT_THAT(text, HasSubstr("dot_general"));
  if (sx > 1 && sx == sy) {
    // collective-fusion fetches the one block of w each device multiplies: no gather.
    EXPECT_THAT(text, HasSubstr("ppermute_start[axes=(x,y)"));
    EXPECT_EQ(text.find("all_gather"), std::string::npos);
  } else {
    // Collectives over size-1 axes are identities that canonicalize removes.
    EXPECT_EQ(text.find("all_gather") != std::string::npos, sx > 1);
    for (const char* op : {"dynamic_slice", "axis_index"}) EXPECT_THAT(text, HasSubstr(op));
  }
  EXPECT_EQ(text.find("psum") != std::string::npos, sy > 1);
  EXPECT_THAT(text, HasSubstr("view=per_device"));
  EXPECT_THAT(text, HasSubstr("param_shardings=(P(x,y),P(x,None))"));
  EXPECT_EQ(matmul3.cache_size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Meshes, NorthStarTest,
                         ::testing::Values(std::pair<int64_t, int64_t>{1, 1},
                                           std::pair<int64_t, int64_t>{2, 2},
                                           std::pair<int64_t, int64_t>{4, 2},
                                           std::pair<int64_t, int64_t>{2, 4},
                                           std::pair<int64_t, int64_t>{4, 4}));

// Compiled, like Jitted: one Tracer returned gives one Array, a vector of Tracers a vector.
TEST(JitTest, CompiledReturnsWhatTheFunctionReturns) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  Array x = *device_put(HostTensor(DType::kF32, {4}, {1, 2, 3, 4}), NamedSharding(mesh, P("x")));
  auto one = jit([](Tracer a) { return a * 2.0; });
  auto lowered = one.lower(x);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  static_assert(std::is_same_v<decltype(lowered), absl::StatusOr<Lowered<Array>>>);
  absl::StatusOr<Compiled<Array>> compiled = lowered->compile();
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  absl::StatusOr<Array> out = (*compiled)(x);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->type(), (ShapedType{DType::kF32, {4}}));
  ExpectNear(*out->to_host(), {2, 4, 6, 8}, 0);
  absl::StatusOr<Array> again = compiled->call({x});
  ASSERT_TRUE(again.ok()) << again.status();
  ExpectNear(*again->to_host(), {2, 4, 6, 8}, 0);

  auto two = jit([](Tracer a) { return std::vector<Tracer>{a + 1.0, a * 3.0}; });
  absl::StatusOr<Compiled<std::vector<Array>>> both = two.lower(x)->compile();
  ASSERT_TRUE(both.ok()) << both.status();
  absl::StatusOr<std::vector<Array>> outs = (*both)(x);
  ASSERT_TRUE(outs.ok()) << outs.status();
  ASSERT_EQ(outs->size(), 2u);
  ExpectNear(*(*outs)[0].to_host(), {2, 3, 4, 5}, 0);
  ExpectNear(*(*outs)[1].to_host(), {3, 6, 9, 12}, 0);
}

TEST(JitTest, CachesByTypeAndSharding) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  auto f = jit([](Tracer a) { return a * 2.0 + 1.0; });
  Array a = *device_put(HostTensor(DType::kF32, {4}, {1, 2, 3, 4}), NamedSharding(mesh, P("x")));
  Array b = *device_put(HostTensor(DType::kF32, {4}, {1, 2, 3, 4}), NamedSharding(mesh, P()));
  Array c = *device_put(HostTensor(DType::kF32, {6}, {0}), NamedSharding(mesh, P("x")));
  EXPECT_EQ(f(a)->to_host()->ToDoubles(), (std::vector<double>{3, 5, 7, 9}));
  ASSERT_TRUE(f(a).ok());
  EXPECT_EQ(f.cache_size(), 1u);
  ASSERT_TRUE(f(b).ok());
  ASSERT_TRUE(f(c).ok());
  EXPECT_EQ(f.cache_size(), 3u);
}

TEST(JitTest, CacheKeyDistinguishesAxesSpecsAndRuntimes) {
  Runtime rt({.num_devices = 2});
  Runtime other({.num_devices = 2});
  auto f = jit([](Tracer a) { return a + 1.0; });
  const Tensor host = HostTensor(DType::kF32, {4}, {1, 2, 3, 4});
  const Mesh x = *make_mesh(rt, {{"x", 2}});
  const Mesh y = *make_mesh(rt, {{"y", 2}});
  const Mesh xy = *make_mesh(rt, {{"x", 1}, {"y", 2}});
  const std::vector<Array> args = {
      *device_put(host, NamedSharding(x, P("x"))),
      *device_put(host, NamedSharding(y, P("y"))),
      *device_put(host, NamedSharding(xy, P("y"))),
      *device_put(host, NamedSharding(xy, P(Axes{"x", "y"}))),
      *device_put(host, NamedSharding(*make_mesh(other, {{"x", 2}}), P("x"))),
  };
  for (size_t i = 0; i < args.size(); ++i) {
    absl::StatusOr<Array> out = f(args[i]);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->to_host()->ToDoubles(), (std::vector<double>{2, 3, 4, 5}));
    EXPECT_EQ(f.cache_size(), i + 1);
  }
  // The same arguments again: every call finds its program.
  for (const Array& a : args) ASSERT_TRUE(f(a).ok());
  EXPECT_EQ(f.cache_size(), args.size());
  // Another dtype of the same shape and sharding, and a spec written with a trailing None (equal
  // as a sharding, but the key takes specs as written).
  ASSERT_TRUE(f(*device_put(HostTensor(DType::kS32, {4}, {1, 2, 3, 4}),
                            NamedSharding(x, P("x"))))
                  .ok());
  EXPECT_EQ(f.cache_size(), args.size() + 1);
  const Tensor column = HostTensor(DType::kF32, {4, 1}, {1, 2, 3, 4});
  ASSERT_TRUE(f(*device_put(column, NamedSharding(x, P("x")))).ok());
  ASSERT_TRUE(f(*device_put(column, NamedSharding(x, P("x", None)))).ok());
  EXPECT_EQ(f.cache_size(), args.size() + 3);
  // The key and ir::MeshesEqual list these messages' fields by hand: a new field must be added
  // to both (ir.proto says so).
  EXPECT_EQ(ir::Mesh::descriptor()->field_count(), 2);
  EXPECT_EQ(ir::MeshAxis::descriptor()->field_count(), 2);
  EXPECT_EQ(ir::PartitionSpec::descriptor()->field_count(), 1);
  EXPECT_EQ(ir::DimSpec::descriptor()->field_count(), 1);
}

TEST(JitTest, GlobalViewRunsUnpartitionedAndSaysSo) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  Tensor x_host = *random::normal(random::key(3), {8, 6});
  Tensor w_host = *random::normal(random::key(4), {6, 4});
  Array x = *device_put(x_host, NamedSharding(mesh, P("x", "y")));
  Array w = *device_put(w_host, NamedSharding(mesh, P("x", None)));
  // Without the SPMD partitioner (which would otherwise partition this program).
  auto f = jit([](Tracer x, Tracer w) { return jnp::matmul(x, w); },
               {.out_shardings = std::vector<PartitionSpec>{P("x", None)},
                .pipeline = {.disabled = {"spmd-partition"}}});
  absl::StatusOr<Array> out = f(x, w);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->sharding().spec(), P("x", None));
  ExpectNear(*out->to_host(), MatmulOracle(x_host, w_host), 1e-5);
  std::string text = f.lower(x, w)->as_text();
  EXPECT_THAT(text, HasSubstr("global view, unpartitioned"));
  EXPECT_THAT(text, HasSubstr("view=global"));
}

TEST(JitTest, GlobalViewIsPartitionedWhenEveryOpHasARule) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  Tensor x_host = *random::normal(random::key(3), {8, 6});
  Tensor w_host = *random::normal(random::key(4), {6, 4});
  Array x = *device_put(x_host, NamedSharding(mesh, P("x", "y")));
  Array w = *device_put(w_host, NamedSharding(mesh, P("x", None)));
  // Priced by the model's default rates (tiny arrays: on a fast host every plan costs latency).
  auto f = jit([](Tracer x, Tracer w) { return jnp::matmul(x, w); },
               {.out_shardings = std::vector<PartitionSpec>{P("x", None)},
                .pipeline = {.machine = passes::MachineModel{}}});
  absl::StatusOr<Array> out = f(x, w);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->sharding().spec(), P("x", None));
  ExpectNear(*out->to_host(), MatmulOracle(x_host, w_host), 1e-5);
  std::string text = f.lower(x, w)->as_text();
  EXPECT_THAT(text, Not(HasSubstr("unpartitioned")));
  EXPECT_THAT(text, HasSubstr("view=per_device"));
  // Device (i, j) multiplies x's block by the rows of w its columns meet, which device (j, i)
  // holds: one ppermute transposing the device grid, the local product, a psum over y. No
  // device repeats another's multiply-adds.
  EXPECT_THAT(text, HasSubstr("ppermute[axes=(x,y) perm=((0,0),(2,1),(1,2),(3,3))]"));
  EXPECT_THAT(text, HasSubstr("f32[4,4] = dot_general"));
  EXPECT_THAT(text, HasSubstr("psum[axes=(y)]"));
  EXPECT_THAT(text, Not(HasSubstr("all_gather")));
}

// On the x86 backend plans are priced by this host's kept rates (backends/x86/host_rates.h); the
// reference backend keeps the model's defaults, and a model named in JitOptions is used as given.
// The lowered module records the model, and cost_analysis() estimates by it.
TEST(JitTest, PlansArePricedByTheHostsMeasuredRates) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  std::vector<ShapedType> types = {{DType::kF32, {8, 6}}, {DType::kF32, {6, 4}}};
  std::vector<NamedSharding> shardings = {NamedSharding(mesh, P("x", "y")),
                                          NamedSharding(mesh, P("x", None))};
  auto matmul_fn = [](Tracer x, Tracer w) { return jnp::matmul(x, w); };
  auto host = jit(matmul_fn, {.backend = Backend::kX86}).lower(types, shardings);
  ASSERT_TRUE(host.ok()) << host.status();
  const passes::MachineModel m = host->machine_model();
  EXPECT_GT(m.flops_per_second, 1e8);
  EXPECT_GT(m.bytes_per_second, 1e8);
  EXPECT_NE(m, passes::MachineModel{});
  EXPECT_NE(m.source, "defaults");
  EXPECT_EQ(host->module().machine_model().flops_per_second(), m.flops_per_second);
  EXPECT_THAT(host->as_text(), HasSubstr("machine_model=("));
  auto reference =
      jit(matmul_fn, {.backend = Backend::kReference}).lower(types, shardings);
  ASSERT_TRUE(reference.ok()) << reference.status();
  EXPECT_EQ(reference->machine_model(), passes::MachineModel{});
  EXPECT_EQ(reference->machine_model().source, "defaults");
  const passes::MachineModel named{.flops_per_second = 1e9, .bytes_per_second = 1e9};
  auto pinned =
      jit(matmul_fn, {.pipeline = {.machine = named}}).lower(types, shardings);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->machine_model(), named);
  absl::StatusOr<passes::CostReport> cost = host->cost_analysis();
  ASSERT_TRUE(cost.ok()) << cost.status();
  int64_t collectives = 0;
  for (const passes::CollectiveCost& c : cost->collectives) collectives += c.count;
  EXPECT_DOUBLE_EQ(cost->estimated_seconds,
                   m.Seconds(cost->flops, cost->bytes_communicated, collectives));
}

TEST(JitTest, GlobalViewWithShardMapAndOpsAround) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"i", 4}});
  Tensor host = HostTensor(DType::kF32, {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  Array a = *device_put(host, NamedSharding(mesh, P("i")));
  auto inner = shard_map([](Tracer b) { return lax::psum(b, "i"); }, mesh, {P("i")}, {P()});
  auto f = jit([&](Tracer a) {
    Tracer doubled = a * 2.0;
    return inner(doubled) + 1.0;
  });
  absl::StatusOr<Array> out = f(a);
  ASSERT_TRUE(out.ok()) << out.status();
  // psum of the four blocks [2,4],[6,8],[10,12],[14,16] = [32, 40], plus one.
  EXPECT_EQ(out->to_host()->ToDoubles(), (std::vector<double>{33, 41}));
}

TEST(JitTest, ForiLoopCarriesAndReadsOuterValues) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"i", 1}});
  Array a = *device_put(HostTensor(DType::kF32, {3}, {1, 2, 3}), NamedSharding(mesh, P()));
  auto f = jit([](Tracer a) {
    Tracer ten = lax::full({3}, 10, DType::kF32);
    std::vector<Tracer> out = lax::fori_loop(0, 4,
                                             [&](Tracer i, std::vector<Tracer> c) {
                                               Tracer fi = jnp::broadcast_to(
                                                   lax::convert_element_type(i, DType::kF32), {3});
                                               return std::vector<Tracer>{c[0] + fi, c[1] + ten};
                                             },
                                             {a, a});
    return std::vector<Tracer>{out[0], out[1]};
  });
  absl::StatusOr<std::vector<Array>> out = f(a);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].to_host()->ToDoubles(), (std::vector<double>{7, 8, 9}));
  EXPECT_EQ((*out)[1].to_host()->ToDoubles(), (std::vector<double>{41, 42, 43}));
}

// lax.dynamic_slice and dynamic_update_slice wrap a negative start i of a dimension of size d
// into i + d before clamping (JAX's allow_negative_indices=True), for constant and traced
// starts; with the option off, starts are only clamped (XLA's form). Slices of 2 of a 5-vector.
TEST(JitTest, DynamicSliceStartsWrapLikeJax) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"i", 1}});
  const NamedSharding replicated(mesh, P());
  Array x = *device_put(HostTensor(DType::kF32, {5}, {10, 11, 12, 13, 14}), replicated);
  Array update = *device_put(HostTensor(DType::kF32, {2}, {-1, -2}), replicated);
  struct Case {
    int64_t start;
    bool wrap;
    int64_t first;  // the start JAX uses: wrapped, then clamped into [0, 3]
  };
  for (const Case& c : {Case{-1, true, 3}, Case{-2, true, 3}, Case{-3, true, 2},
                        Case{-7, true, 0}, Case{2, true, 2}, Case{9, true, 3},
                        Case{-1, false, 0}, Case{-3, false, 0}, Case{4, false, 3}}) {
    SCOPED_TRACE(fmt::format("start={} allow_negative_indices={}", c.start, c.wrap));
    std::vector<double> slice = {10.0 + c.first, 11.0 + c.first};
    std::vector<double> updated = {10, 11, 12, 13, 14};
    updated[c.first] = -1;
    updated[c.first + 1] = -2;
    Array start = *device_put(HostTensor(DType::kS32, {}, {static_cast<double>(c.start)}),
                              replicated);
    auto constant_slice = jit([&](Tracer a) { return lax::dynamic_slice(a, {c.start}, {2}, c.wrap); });
    auto traced_slice = jit([&](Tracer a, Tracer i) { return lax::dynamic_slice(a, {i}, {2}, c.wrap); });
    auto constant_update = jit([&](Tracer a, Tracer u) {
      return lax::dynamic_update_slice(a, u, {c.start}, c.wrap);
    });
    auto traced_update = jit([&](Tracer a, Tracer u, Tracer i) {
      return lax::dynamic_update_slice(a, u, {i}, c.wrap);
    });
    EXPECT_EQ(constant_slice(x)->to_host()->ToDoubles(), slice);
    EXPECT_EQ(traced_slice(x, start)->to_host()->ToDoubles(), slice);
    EXPECT_EQ(constant_update(x, update)->to_host()->ToDoubles(), updated);
    EXPECT_EQ(traced_update(x, update, start)->to_host()->ToDoubles(), updated);
  }
}

TEST(JitTest, BroadcastingComparisonsSelectAndReductions) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  Array m = *device_put(HostTensor(DType::kF32, {2, 3}, {1, -2, 3, -4, 5, -6}),
                        NamedSharding(mesh, P("x")));
  Array bias = *device_put(HostTensor(DType::kF32, {3}, {10, 20, 30}), NamedSharding(mesh, P()));
  auto f = jit([](Tracer m, Tracer bias) {
    Tracer shifted = m + bias;                              // [2,3] + [3]
    Tracer relu =
        lax::select(m > lax::full({2, 3}, 0, DType::kF32), m, lax::full({2, 3}, 0, DType::kF32));
    return std::vector<Tracer>{shifted, lax::reduce_sum(relu, {1}), lax::reduce_max(m, {0, 1})};
  });
  absl::StatusOr<std::vector<Array>> out = f(m, bias);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].to_host()->ToDoubles(), (std::vector<double>{11, 18, 33, 6, 25, 24}));
  EXPECT_EQ((*out)[1].to_host()->ToDoubles(), (std::vector<double>{4, 5}));
  EXPECT_EQ((*out)[2].to_host()->ToDoubles(), (std::vector<double>{5}));
}

TEST(JitTest, NamedScopesAndLocationsReachTheIr) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  Array a = *device_put(HostTensor(DType::kF32, {4}, {0}), NamedSharding(mesh, P("x")));
  auto f = jit(shard_map(
      [](Tracer b) {
        NamedScope outer("layer");
        NamedScope inner("reduce");
        return lax::psum(b, "x");
      },
      mesh, {P("x")}, {P("x")}));
  auto lowered = f.lower(a);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_THAT(lowered->as_text(), HasSubstr("@scope(\"layer/reduce\")"));
  EXPECT_THAT(lowered->as_text(), Not(HasSubstr("@loc")));
  EXPECT_THAT(lowered->as_text(/*locations=*/true), HasSubstr("jit_test.cc"));
  // The pipeline records every stage.
  ASSERT_GE(lowered->stages().size(), 3u);
  EXPECT_EQ(lowered->stages()[0].pass, "input");
  auto lower = std::find_if(lowered->stages().begin(), lowered->stages().end(),
                            [](const passes::StageRecord& s) { return s.pass == "lower-shard-map"; });
  ASSERT_NE(lower, lowered->stages().end());
  EXPECT_TRUE(lower->changed);
}

TEST(JitTest, PredAndIntegerPrograms) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  Array a = *device_put(HostTensor(DType::kS32, {4}, {7, -7, 9, 2}), NamedSharding(mesh, P("x")));
  auto f = jit(shard_map(
      [](Tracer b) {
        Tracer q = b / lax::scalar(2, DType::kS32);  // truncates toward zero
        Tracer r = b % 3.0;                     // sign of the dividend
        Tracer flags = lax::psum(b > q, "x");   // pred is summed as s32
        return std::vector<Tracer>{q, r, flags};
      },
      mesh, {P("x")}, {P("x"), P("x"), P("x")}));
  absl::StatusOr<std::vector<Array>> out = f(a);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].to_host()->ToDoubles(), (std::vector<double>{3, -3, 4, 1}));
  EXPECT_EQ((*out)[1].to_host()->ToDoubles(), (std::vector<double>{1, -1, 0, 2}));
  // b > q: [1, 0] on device 0, [1, 1] on device 1; summed over x: [2, 1] on both.
  EXPECT_EQ((*out)[2].to_host()->ToDoubles(), (std::vector<double>{2, 1, 2, 1}));
}

}  // namespace
}  // namespace shardjit

namespace shardjit {
namespace {

TEST(JitTest, NegativeCollectiveAxesCountFromTheEnd) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  Array a = *device_put(HostTensor(DType::kF32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}),
                        NamedSharding(mesh, P("x")));
  auto f = jit(shard_map(
      [](Tracer b) {  // b: f32[1,4] per device
        return std::vector<Tracer>{lax::all_gather(b, "x", -1), lax::all_gather(b, "x", -1, true),
                                   lax::psum_scatter(b, "x", -1, true)};
      },
      mesh, {P("x")}, {P("x"), P("x"), P("x")}));
  auto lowered = f.lower(a);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_THAT(lowered->as_text(), HasSubstr("f32[1,4,2] = all_gather[axes=(x) axis=2 tiled=False]"));
  EXPECT_THAT(lowered->as_text(), HasSubstr("f32[1,8] = all_gather[axes=(x) axis=1 tiled=True]"));
  EXPECT_THAT(lowered->as_text(), HasSubstr("psum_scatter[axes=(x) scatter_dimension=1"));
  absl::StatusOr<std::vector<Array>> out = f(a);
  ASSERT_TRUE(out.ok()) << out.status();
  // psum over the two rows [1..4] + [5..8] = [6, 8, 10, 12]; device i keeps columns 2i, 2i+1.
  EXPECT_EQ((*out)[2].to_host()->ToDoubles(), (std::vector<double>{6, 8, 10, 12}));
}

}  // namespace
}  // namespace shardjit

namespace shardjit {
namespace {

TEST(JitTest, OutShardingsAreCheckedAndApplied) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  Array a = *device_put(HostTensor(DType::kF32, {4}, {1, 2, 3, 4}), NamedSharding(mesh, P("x")));
  auto two = jit([](Tracer b) { return std::vector<Tracer>{b, b}; },
                 {.out_shardings = std::vector<PartitionSpec>{P("x")}});
  EXPECT_THAT(std::string(two(a).status().message()),
              HasSubstr("has 2 results but out_shardings has 1 entries"));
  // A shard_map's out_specs differ from the requested layout: the result is re-laid out.
  auto f = jit(shard_map([](Tracer b) { return b * 2.0; }, mesh, {P("x")}, {P("x")}),
               {.out_shardings = std::vector<PartitionSpec>{P()}});
  absl::StatusOr<Array> out = f(a);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->sharding().spec(), P());
  EXPECT_EQ(out->shards()[1].ToDoubles(), (std::vector<double>{2, 4, 6, 8}));
}

}  // namespace
}  // namespace shardjit

namespace shardjit {
namespace {

TEST(JitTest, CacheKeyIncludesTheDeviceAssignment) {
  Runtime rt({.num_devices = 4});
  Mesh low = *make_mesh(rt, {{"x", 2}}, {0, 1});
  Mesh high = *make_mesh(rt, {{"x", 2}}, {3, 2});
  auto f = jit(shard_map([](Tracer b) { return lax::psum(b, "x"); }, low, {P("x")}, {P()}));
  auto g = jit([](Tracer b) { return b + 1.0; });
  Array a = *device_put(HostTensor(DType::kF32, {2}, {1, 2}), NamedSharding(low, P("x")));
  Array b = *device_put(HostTensor(DType::kF32, {2}, {1, 2}), NamedSharding(high, P("x")));
  ASSERT_TRUE(g(a).ok());
  absl::StatusOr<Array> out = g(b);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(g.cache_size(), 2u);
  EXPECT_EQ(out->sharding().mesh(), high);
  EXPECT_EQ(out->to_host()->ToDoubles(), (std::vector<double>{2, 3}));
  ASSERT_TRUE(f(a).ok());
}

TEST(JitTest, InfiniteCollectiveTimeoutWaits) {
  Runtime rt({.num_devices = 4, .collective_timeout = absl::InfiniteDuration()});
  Mesh mesh = *make_mesh(rt, {{"x", 4}});
  Array a = *device_put(HostTensor(DType::kF32, {4}, {1, 2, 3, 4}), NamedSharding(mesh, P("x")));
  auto f = jit(shard_map([](Tracer b) { return lax::psum(b, "x"); }, mesh, {P("x")}, {P()}));
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<Array> out = f(a);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->to_host()->ToDoubles(), (std::vector<double>{10}));
  }
}

}  // namespace
}  // namespace shardjit
