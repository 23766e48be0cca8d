// The seed variants give the f64 product up to their dtypes' rounding on 2x2 and 4x4 meshes, and
// lower to the collectives the notebook wrote.
#include <cmath>
#include <set>
#include <string>

#include "examples/seed_variants.h"
#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit::examples {
namespace {

using ::testing::HasSubstr;

class SeedVariantsTest : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(SeedVariantsTest, EveryVariantMatchesF64) {
  auto [sx, sy] = GetParam();
  const int64_t m = 64, k = 96, n = 32;
  Runtime rt({.num_devices = static_cast<int>(sx * sy)});
  Mesh mesh = *make_mesh(rt, {{"x", sx}, {"y", sy}});
  Tensor x_host = *random::normal(random::key(11), {m, k}, DType::kBF16);
  Tensor w_host = *random::normal(random::key(12), {k, n}, DType::kBF16);
  Array x = *device_put(x_host, NamedSharding(mesh, P("x", "y")));
  Array w = *device_put(w_host, NamedSharding(mesh, P("x", None)));
  std::vector<double> xd = x_host.ToDoubles(), wd = w_host.ToDoubles(), want(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) want[i * n + j] += xd[i * k + p] * wd[p * n + j];
    }
  }
  // As compiled (collective-fusion on) and as written (off).
  for (bool fused : {true, false}) {
    std::set<std::string> disabled;
    if (!fused) disabled.insert("collective-fusion");
    for (SeedVariant& v : SeedVariants(mesh, k, DefaultBackend(), disabled)) {
      SCOPED_TRACE("variant " + v.name + (fused ? " fused" : " as written"));
      absl::StatusOr<Array> out = v.program(x, w);
      ASSERT_TRUE(out.ok()) << out.status();
      Tensor got = *out->to_host();
      const bool f32 = v.name == "d" || v.name == "e" || v.name == "f" || v.name == "g" ||
                       v.name == "h";
      EXPECT_EQ(got.dtype(), f32 ? DType::kF32 : DType::kBF16);
      // bf16 output: one rounding (b; and a, c when fused: their partial sums stay in f32), or
      // a rounding per partial sum plus one (a and c as written; the SPMD partitioner turns a
      // into c's program).
      const bool partial_sums = !fused && (v.name == "a" || v.name == "c");
      const double rel = f32            ? 1e-5
                         : partial_sums ? 3 * std::ldexp(1.0, -8)
                                        : std::ldexp(1.0, -8);
      const double abs_tol = f32 ? 1e-4 : partial_sums ? 0.1 : 1e-3;
      for (int64_t i = 0; i < m * n; ++i) {
        ASSERT_NEAR(got.GetDouble(i), want[i], abs_tol + rel * std::abs(want[i]))
            << "element " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, SeedVariantsTest,
                         ::testing::Values(std::pair<int64_t, int64_t>{2, 2},
                                           std::pair<int64_t, int64_t>{4, 4},
                                           std::pair<int64_t, int64_t>{1, 4},
                                           std::pair<int64_t, int64_t>{4, 1}));

TEST(SeedVariantsTest, LowerToTheNotebooksCollectives) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  std::vector<ShapedType> types = {{DType::kBF16, {2048, 2048}}, {DType::kBF16, {2048, 1024}}};
  std::vector<NamedSharding> shardings = {NamedSharding(mesh, P("x", "y")),
                                          NamedSharding(mesh, P("x", None))};
  std::map<std::string, std::vector<std::string>> expected = {
      // The partitioner fetches the one block of w each device multiplies (the device grid
      // transposed) and leaves the result layout to the compiler (as in JAX): the partial sums
      // end in a psum_scatter over y, which collective fusion turns into a reduce-scatter ring
      // (each step's block of x's rows read in place).
      {"a", {"view=per_device", "ppermute[axes=(x,y) perm=((0,0),(2,1),(1,2),(3,3))]",
             "f32[512,1024] = dot_general", "ppermute_start[axes=(y) perm=((0,1),(1,0))]",
             "dot_accumulate", "result_shardings=(P((x,y),None))"}},
      // x's gather over y (along the contracting dim) becomes a ring multiplying row blocks of
      // w's gather over x as x's shards arrive.
      {"b", {"all_gather[axes=(x) axis=0 tiled=True]", "ppermute_start[axes=(y)",
             "dot_accumulate"}},
      // The bf16 partial sums stay in f32 and round once.
      {"c", {"ppermute_start[axes=(x,y)", "ppermute_done",
             "f32[1024,1024] = dot_general", "f32[1024,1024] = psum[axes=(y)]",
             "bf16[1024,1024] = convert_element_type"}},
      {"d", {"ppermute_start[axes=(x,y)", "preferred_element_type=f32",
             "f32[1024,1024] = psum[axes=(y)]"}},
      {"e", {"fori_loop[lower=0 upper=1", "ppermute[axes=(x) perm=((0,1),(1,0))]",
             "dynamic_update_slice", "psum[axes=(y)]"}},
      {"f", {"ppermute_start[axes=(x,y) perm=((0,0),(2,1),(1,2),(3,3))]",
             "ppermute_start[axes=(y) perm=((0,1),(1,0))]", "result_shardings=(P(x,y))"}},
      {"g", {"pallas_call[name=matmul grid=(8,8,8)", "f32[1024,1024] = psum[axes=(y)]"}},
      // The weights gathered by the kernel's remote copies, not by a collective.
      {"h", {"pallas_call[name=ring_all_gather grid=(2)", "dma_start", "semaphore_wait",
             "f32[1024,1024] = psum[axes=(y)]"}}};
  for (SeedVariant& v : SeedVariants(mesh, 2048)) {
    auto lowered = v.program.lower(types, shardings);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    for (const std::string& fragment : expected[v.name]) {
      EXPECT_THAT(lowered->as_text(), HasSubstr(fragment)) << "variant " << v.name;
    }
  }
}

// The global-view jit(matmul) (a) at the seed's size on 2-D meshes: no device repeats another's
// multiply-adds (its flops are its share of the whole product's), and the chosen plan's
// collectives and local shapes.
TEST(SeedVariantsTest, GlobalViewMatmulDoesNoRedundantWork) {
  struct Case {
    int64_t sx, sy;
    std::vector<std::string> fragments;
  };
  // Where the partial sums end in a psum_scatter, collective fusion makes it a reduce-scatter
  // ring: one block of the product per step.
  const std::vector<Case> cases = {
      {2, 2,
       {"ppermute[axes=(x,y) perm=((0,0),(2,1),(1,2),(3,3))] b",
        "f32[512,1024] = dot_general", "ppermute_start[axes=(y) perm=((0,1),(1,0))]",
        "dot_accumulate"}},
      // Device (i, j) receives w's block j from device (j, i): the grid transposed.
      {4, 4,
       {"a:bf16[512,512] b:bf16[512,1024]", "ppermute[axes=(x,y) perm=((0,0),(4,1),(8,2),",
        "f32[128,1024] = dot_general", "ppermute_start[axes=(y) perm=((0,1),(1,2),(2,3),(3,0))]",
        "dot_accumulate"}},
      {2, 4, {"all_to_all[axes=(y)", "ppermute_start[axes=(x)", "dot_accumulate"}},
      {4, 2,
       {"all_gather[axes=(x) axis=0", "f32[256,1024] = dot_general", "ppermute_start[axes=(y)",
        "dot_accumulate"}},
  };
  const int64_t m = 2048, k = 2048, n = 1024;
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{}x{}", c.sx, c.sy));
    Runtime rt({.num_devices = static_cast<int>(c.sx * c.sy), .num_threads = 1});
    Mesh mesh = *make_mesh(rt, {{"x", c.sx}, {"y", c.sy}});
    SeedVariant a = SeedVariants(mesh, k)[0];
    ASSERT_EQ(a.name, "a");
    auto lowered =
        a.program.lower({{DType::kBF16, {m, k}}, {DType::kBF16, {k, n}}},
                        {NamedSharding(mesh, P("x", "y")), NamedSharding(mesh, P("x", None))});
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    absl::StatusOr<passes::CostReport> cost = lowered->cost_analysis();
    ASSERT_TRUE(cost.ok()) << cost.status();
    // The product's share, plus the conversion of the result block (a redundant plan would
    // repeat multiply-adds: twice the share or more).
    const int64_t share = 2 * m * k * n / (c.sx * c.sy);
    EXPECT_GE(cost->flops, share);
    EXPECT_LE(cost->flops, share + m * n / (c.sx * c.sy));
    for (const std::string& fragment : c.fragments) {
      EXPECT_THAT(lowered->as_text(), HasSubstr(fragment));
    }
  }
}

}  // namespace
}  // namespace shardjit::examples
