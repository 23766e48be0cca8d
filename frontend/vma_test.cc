// Varying-manual-axes typing of shard_map bodies (jax's check_vma, on by default): the pvary
// inserted where an invariant value meets varying ones, psum of an invariant value, the
// gradient of a replicated parameter as one psum (the pvary's transpose) instead of psums on
// every path, grad inside a body (psum transposes to pvary), branches and loops, and JAX's errors;
// check_vma=false keeps JAX's check_vma=False semantics. Values against hand-derived ones.
#include <cmath>
#include <string>
#include <vector>

#include "frontend/shardjit.h"
#include "ir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class VmaTest : public ::testing::TestWithParam<Backend> {
 protected:
  VmaTest() : rt_({.num_devices = 4}), mesh_(*make_mesh(rt_, {{"i", 4}})) {}
  Array Put(std::vector<int64_t> shape, std::vector<double> values, PartitionSpec spec) {
    return *device_put(HostTensor(DType::kF64, std::move(shape), std::move(values)),
                       NamedSharding(mesh_, spec));
  }
  JitOptions Options() const { return {.backend = GetParam()}; }
  Runtime rt_;
  Mesh mesh_;
};

TEST_P(VmaTest, PvaryWhereOperandsDisagreeAndPsumOfAnInvariantValue) {
  Array w = Put({3}, {1, 2, 3}, P());
  Array x = Put({8}, {1, 2, 3, 4, 5, 6, 7, 8}, P("i"));
  // x varies over i, w does not: x * w multiplies by pvary(w); psum(w) of the invariant w is 4w.
  auto f = jit(shard_map(
                   [](Tracer w, Tracer x) {
                     Tracer scaled = x * lax::reduce_sum(w, {0});
                     return std::vector<Tracer>{scaled, lax::psum(w, "i")};
                   },
                   mesh_, {P(), P("i")}, {P("i"), P()}),
               Options());
  absl::StatusOr<LoweredBase> lowered = f.lower(w, x);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  std::string traced = ir::PrintModule(lowered->traced_module());
  EXPECT_EQ(Count(traced, "= pvary[axes=(i)]"), 2) << traced;  // the sum of w, w for psum
  EXPECT_EQ(Count(traced, "psum[axes=(i) invariant=True]"), 1) << traced;
  absl::StatusOr<std::vector<Array>> out = f(w, x);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> scaled = (*out)[0].to_host()->ToDoubles();
  for (int k = 0; k < 8; ++k) EXPECT_EQ(scaled[k], (k + 1) * 6.0);
  EXPECT_EQ((*out)[1].to_host()->ToDoubles(), (std::vector<double>{4, 8, 12}));
}

// jax's shard_map documentation: the gradient of a replicated parameter. With vma types, the
// pvary that meets w with the varying x transposes to the one psum w's gradient needs, and the
// forward psum transposes to a pvary (no communication); without them, psum transposes to psum
// and shard_map's transpose divides the result's cotangent and sums w's.
TEST_P(VmaTest, GradientOfAReplicatedParameterIsOnePsum) {
  const std::vector<double> xv = {0.5, -1, 1.5, 2, -0.25, 0.75, 1.25, -2};
  const std::vector<double> wv = {0.3, -0.7};
  Array w = Put({2}, wv, P());
  Array x = Put({8, 2}, [&] {
    std::vector<double> v;
    for (double a : xv) {
      v.push_back(a);
      v.push_back(a * 0.5);
    }
    return v;
  }(), P("i"));
  std::vector<int> psums, divs;
  std::vector<std::vector<double>> grads;
  for (bool check_vma : {true, false}) {
    auto loss = shard_map(
        [](Tracer w, Tracer x) {
          Tracer local = lax::reduce_sum(lax::sin(x * lax::broadcast_in_dim(w, x.shape(), {1})),
                                         {0, 1});
          return lax::psum(local, "i");
        },
        mesh_, {P(), P("i")}, {P()}, check_vma);
    auto g = jit(grad(loss, 0), Options());
    absl::StatusOr<LoweredBase> lowered = g.lower(w, x);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    psums.push_back(Count(lowered->as_text(), "= psum["));
    divs.push_back(Count(lowered->as_text(), "= div "));
    absl::StatusOr<Array> out = g(w, x);
    ASSERT_TRUE(out.ok()) << out.status();
    grads.push_back(out->to_host()->ToDoubles());
  }
  // d/dw_j sum_k sin(x_kj w_j) = sum_k cos(x_kj w_j) x_kj.
  for (int j = 0; j < 2; ++j) {
    double want = 0;
    for (double a : xv) {
      const double xkj = j == 0 ? a : a * 0.5;
      want += std::cos(xkj * wv[j]) * xkj;
    }
    EXPECT_NEAR(grads[0][j], want, 1e-12) << "check_vma";
    EXPECT_NEAR(grads[1][j], want, 1e-12) << "check_vma=false";
  }
  // With types: w's gradient summed once, nothing else. Without: the loss's cotangent is divided
  // by the 4 devices and summed back (a psum of an invariant value, which collective-simplify
  // turns into a product), and w's cotangent summed by shard_map's transpose.
  EXPECT_EQ(psums[0], 1);
  EXPECT_EQ(divs[0], 0);
  EXPECT_EQ(psums[1], 1);
  EXPECT_EQ(divs[1], 1);
}

// grad inside the body: psum transposes to pvary under vma types (each device's gradient of
// its own copy of the summed loss is 2x), to psum without them (the sum over devices, 4 * 2x).
TEST_P(VmaTest, GradInsideTheBody) {
  Array x = Put({4}, {1, 2, 3, 4}, P("i"));
  for (bool check_vma : {true, false}) {
    absl::StatusOr<Array> g =
        jit(shard_map(grad([](Tracer x) { return lax::psum(lax::reduce_sum(x * x, {0}), "i"); }),
                      mesh_, {P("i")}, {P("i")}, check_vma),
            Options())(x);
    ASSERT_TRUE(g.ok()) << g.status();
    const double factor = check_vma ? 2 : 8;
    EXPECT_EQ(g->to_host()->ToDoubles(),
              (std::vector<double>{factor, 2 * factor, 3 * factor, 4 * factor}));
  }
}

// A result laid out over an axis it does not vary over (each device's copy of a psum) is a pvary
// of it: the gradient of the sum of the copies is 4, as without types; a vmap of a checkpoint
// inside a typed body keeps its values' types (no extra pvary, no extra psum).
TEST_P(VmaTest, OutSpecsAndRebuiltRegionsKeepTheTypes) {
  Array x = Put({4}, {1, 2, 3, 4}, P("i"));
  for (bool check_vma : {true, false}) {
    auto copies = shard_map([](Tracer x) { return lax::psum(x, "i"); }, mesh_, {P("i")},
                            {P("i")}, check_vma);
    absl::StatusOr<Array> g =
        jit(grad([copies](Tracer x) { return lax::reduce_sum(copies(x), {0}); }), Options())(x);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->to_host()->ToDoubles(), (std::vector<double>{4, 4, 4, 4})) << check_vma;
  }
  Array rows = Put({3, 8}, std::vector<double>(24, 1.0), P(None, "i"));
  auto summed = shard_map(
      [](Tracer block) {  // [3, 2]: rows batched, each row's psum checkpointed
        return vmap(checkpoint([](Tracer r) { return lax::psum(r * r, "i"); }))({block});
      },
      mesh_, {P(None, "i")}, {P()});
  absl::StatusOr<Array> g =
      jit(grad([summed](Tracer x) { return lax::reduce_sum(summed(x), {0, 1}); }), Options())(
          rows);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->to_host()->ToDoubles(), std::vector<double>(24, 2.0));  // d/dx sum x^2
}

// A branch that returns an invariant value and one that returns a varying one: both results
// vary (the first branch gets a pvary); the gradient through it sums w's cotangent once.
TEST_P(VmaTest, BranchesAndLoops) {
  Array w = Put({1}, {0.5}, P());
  Array x = Put({4}, {1, 2, 3, 4}, P("i"));
  auto body = [](Tracer w, Tracer x) {
    Tracer pick = lax::cond(lax::reduce_sum(x, {0}) > lax::full({}, 2.5, DType::kF64),
                            [](std::vector<Tracer> o) { return std::vector<Tracer>{o[1] * o[0]}; },
                            [](std::vector<Tracer> o) { return std::vector<Tracer>{o[1]}; },
                            {x, w})[0];
    return lax::psum(lax::reduce_sum(pick * pick, {0}), "i");
  };
  absl::StatusOr<std::vector<Array>> g =
      jit(value_and_grad(shard_map(body, mesh_, {P(), P("i")}, {P()}), {0}), Options())(w, x);
  ASSERT_TRUE(g.ok()) << g.status();
  // Devices with x = 3, 4 take w * x; those with 1, 2 take w: loss = sum of squares.
  const double wv = 0.5;
  EXPECT_NEAR((*g)[0].to_host()->GetDouble(0), 2 * wv * wv + (9 + 16) * wv * wv, 1e-12);
  EXPECT_NEAR((*g)[1].to_host()->GetDouble(0), 2 * 2 * wv + (9 + 16) * 2 * wv, 1e-12);
  // Each branch is traced once, also when one returns less than the other varies over (its
  // result then gets a pvary appended): a side effect of tracing runs once per branch.
  int traced_true = 0, traced_false = 0;
  absl::StatusOr<Array> picked = jit(shard_map(
      [&](Tracer w, Tracer x) {
        return lax::cond(
            lax::reduce_sum(x, {0}) > lax::full({}, 2.5, DType::kF64),
            [&](std::vector<Tracer> o) {
              ++traced_true;
              return std::vector<Tracer>{o[0] * o[1]};
            },
            [&](std::vector<Tracer> o) {
              ++traced_false;
              return std::vector<Tracer>{o[1] * 10.0};
            },
            {x, w})[0];
      },
      mesh_, {P(), P("i")}, {P("i")}))(w, x);
  ASSERT_TRUE(picked.ok()) << picked.status();
  EXPECT_EQ(traced_true, 1);
  EXPECT_EQ(traced_false, 1);
  EXPECT_EQ(picked->to_host()->ToDoubles(), (std::vector<double>{5, 5, 1.5, 2}));
  // A loop whose carry starts invariant and becomes varying: JAX's error.
  absl::StatusOr<Array> loop = jit(shard_map(
      [](Tracer w, Tracer x) {
        return lax::fori_loop(0, 2, [&](Tracer, Tracer c) { return c + x; }, w);
      },
      mesh_, {P(), P("i")}, {P("i")}))(w, x);
  EXPECT_THAT(std::string(loop.status().message()),
              HasSubstr("fori_loop: the input carry component 0 varies over () but the "
                        "corresponding output carry component varies over (i)"));
  // With the initial carry made varying, it runs.
  absl::StatusOr<Array> fixed = jit(shard_map(
      [](Tracer w, Tracer x) {
        return lax::fori_loop(0, 2, [&](Tracer, Tracer c) { return c + x; }, lax::pvary(w, "i"));
      },
      mesh_, {P(), P("i")}, {P("i")}))(w, x);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->to_host()->ToDoubles(), (std::vector<double>{2.5, 4.5, 6.5, 8.5}));
}

// jax's all_gather_invariant: the gathered value typed invariant (an out_spec may claim it
// replicated, which all_gather's varying result may not), transposing to the dynamic_slice of
// this device's block: the gradient of sum(c * gather(x)) is c, not the 4c a psum_scatter of the
// invariant cotangent would give. Tiled and stacked, under vmap, on {i:4} and over (a, b) of
// {a:2, b:2}.
TEST_P(VmaTest, AllGatherInvariantIsReplicatedAndTransposesToTheBlock) {
  const std::vector<double> xv = {1, -2, 3, 0.5, -1.5, 2.5, 4, -0.25};
  const std::vector<double> cv = {0.5, 1, -1, 2, 3, -0.5, 0.25, 1.5};
  Array x = Put({8}, xv, P("i"));
  Array c = Put({8}, cv, P());
  auto gathered = shard_map([](Tracer x) { return lax::all_gather_invariant(x, "i", 0, true); },
                            mesh_, {P("i")}, {P()});
  absl::StatusOr<Array> all = jit(gathered, Options())(x);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->to_host()->ToDoubles(), xv);
  absl::StatusOr<Array> varying = jit(
      shard_map([](Tracer x) { return lax::all_gather(x, "i", 0, true); }, mesh_, {P("i")},
                {P()}),
      Options())(x);
  EXPECT_THAT(std::string(varying.status().message()), HasSubstr("but it varies over (i)"));
  auto loss = [&](bool stacked) {
    return shard_map(
        [stacked](Tracer x, Tracer c) {
          Tracer g = stacked ? lax::reshape(lax::all_gather_invariant(x, "i", 1, false), {8})
                             : lax::all_gather_invariant(x, "i", 0, true);
          return lax::reduce_sum(g * c, {0});
        },
        mesh_, {P("i"), P()}, {P()});
  };
  for (bool stacked : {false, true}) {
    auto g = jit(grad(loss(stacked), 0), Options());
    absl::StatusOr<LoweredBase> lowered = g.lower(x, c);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    EXPECT_EQ(Count(lowered->as_text(), "psum_scatter"), 0) << lowered->as_text();
    absl::StatusOr<Array> dx = g(x, c);
    ASSERT_TRUE(dx.ok()) << dx.status();
    // Stacked along axis 1 of [2, 4]: element (r, k) is block k's row r, c[4r + k].
    std::vector<double> want = cv;
    if (stacked) {
      for (int k = 0; k < 4; ++k) {
        for (int r = 0; r < 2; ++r) want[2 * k + r] = cv[4 * r + k];
      }
    }
    EXPECT_EQ(dx->to_host()->ToDoubles(), want) << stacked;
  }
  // vmap over the block's rows: each row gathered across the devices.
  Array rows = Put({3, 8}, [] {
    std::vector<double> v(24);
    for (int k = 0; k < 24; ++k) v[k] = k * 0.5 - 3;
    return v;
  }(), P(None, "i"));
  absl::StatusOr<Array> batched =
      jit(shard_map(
              [](Tracer block) {
                return vmap([](Tracer r) { return lax::all_gather_invariant(r, "i", 0, true); })(
                    {block});
              },
              mesh_, {P(None, "i")}, {P()}),
          Options())(rows);
  ASSERT_TRUE(batched.ok()) << batched.status();
  EXPECT_EQ(batched->to_host()->ToDoubles(), rows.to_host()->ToDoubles());
  // Over both axes of a 2x2 mesh: the gradient of sum(c * gather) is c again.
  Runtime rt({.num_devices = 4});
  Mesh grid = *make_mesh(rt, {{"a", 2}, {"b", 2}});
  Array gx = *device_put(HostTensor(DType::kF64, {8}, xv), NamedSharding(grid, P(Axes{"a", "b"})));
  Array gc = *device_put(HostTensor(DType::kF64, {8}, cv), NamedSharding(grid, P()));
  auto grid_loss = shard_map(
      [](Tracer x, Tracer c) {
        return lax::reduce_sum(lax::all_gather_invariant(x, {"a", "b"}, 0, true) * c, {0});
      },
      grid, {P(Axes{"a", "b"}), P()}, {P()});
  absl::StatusOr<Array> grid_dx = jit(grad(grid_loss, 0), Options())(gx, gc);
  ASSERT_TRUE(grid_dx.ok()) << grid_dx.status();
  EXPECT_EQ(grid_dx->to_host()->ToDoubles(), cv);
}

TEST(VmaErrors, AsJaxGivesThem) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"i", 4}});
  Array x = *device_put(HostTensor(DType::kF32, {4}, {1, 2, 3, 4}), NamedSharding(mesh, P("i")));
  // An out_spec that claims replication of a varying value.
  absl::StatusOr<Array> varying =
      jit(shard_map([](Tracer x) { return x * 2.0; }, mesh, {P("i")}, {P()}))(x);
  EXPECT_THAT(std::string(varying.status().message()),
              HasSubstr("out_specs[0] is P(), which implies that the corresponding output value "
                        "is replicated across mesh axis 'i', but it varies over (i)"));
  // check_vma=false trusts the out_spec (each device's block is the assembled value).
  EXPECT_TRUE(
      jit(shard_map([](Tracer x) { return x * 2.0; }, mesh, {P("i")}, {P()}, false))(x).ok());
  // pvary is nothing to cast without the types.
  auto untyped = jit(shard_map([](Tracer x) { return lax::pvary(x * 2.0, "i"); }, mesh, {P("i")},
                               {P("i")}, false));
  absl::StatusOr<LoweredBase> lowered = untyped.lower(x);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_EQ(ir::PrintModule(lowered->traced_module()).find("pvary"), std::string::npos);
  // axis_index_groups in a typed psum.
  absl::StatusOr<Array> groups = jit(shard_map(
      [](Tracer x) { return lax::psum(x, "i", {{0, 1}, {2, 3}}); }, mesh, {P("i")}, {P("i")}))(x);
  EXPECT_THAT(std::string(groups.status().message()),
              HasSubstr("psum: axis_index_groups are not supported in a shard_map body typed "
                        "with varying manual axes"));
  // pbroadcast of an invariant value: JAX refuses it (no pvary is inserted, unlike psum's);
  // of a varying one every device gets the source's block; untyped, the invariant one too.
  Array r = *device_put(HostTensor(DType::kF32, {4}, {1, 2, 3, 4}), NamedSharding(mesh, P()));
  auto broadcast = [](Tracer v) { return lax::pbroadcast(v * 2.0, "i", 2); };
  absl::StatusOr<Array> invariant = jit(shard_map(broadcast, mesh, {P()}, {P("i")}))(r);
  EXPECT_THAT(std::string(invariant.status().message()),
              HasSubstr("pbroadcast: Collective pbroadcast must be applied to a device-varying "
                        "type, but got {} for collective acting over axis name (i)"));
  absl::StatusOr<Array> from_source = jit(shard_map(broadcast, mesh, {P("i")}, {P("i")}))(x);
  ASSERT_TRUE(from_source.ok()) << from_source.status();
  EXPECT_EQ(from_source->to_host()->ToDoubles(), (std::vector<double>{6, 6, 6, 6}));
  absl::StatusOr<Array> untyped_broadcast =
      jit(shard_map(broadcast, mesh, {P()}, {P("i")}, false))(r);
  ASSERT_TRUE(untyped_broadcast.ok()) << untyped_broadcast.status();
  EXPECT_EQ(untyped_broadcast->to_host()->ToDoubles(),
            (std::vector<double>{2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6, 8}));
}

INSTANTIATE_TEST_SUITE_P(Backends, VmaTest,
                         ::testing::Values(Backend::kX86, Backend::kReference),
                         [](const auto& info) { return AbslUnparseFlag(info.param); });

}  // namespace
}  // namespace shardjit
