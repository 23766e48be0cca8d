// The same program on the same inputs gives bitwise-identical results run after run, whatever
// the number of threads the devices share and a device's GEMMs split over: reductions combine in
// a fixed order (a collective sums its group in group order; a GEMM splits rows or columns over
// threads, never the contracting dimension).
#include <map>
#include <string>
#include <vector>

#include "examples/seed_variants.h"
#include "frontend/shardjit.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

// Every seed variant's result per mesh, as doubles (exact for f32 and bf16).
using Results = std::map<std::string, std::vector<double>>;

Results RunSeedVariants(int num_threads, int64_t sx, int64_t sy) {
  const int64_t m = 256, k = 512, n = 256;
  Runtime rt({.num_devices = static_cast<int>(sx * sy), .num_threads = num_threads});
  Mesh mesh = *make_mesh(rt, {{"x", sx}, {"y", sy}});
  Array x = *device_put(*random::normal(random::key(21), {m, k}, DType::kBF16),
                        NamedSharding(mesh, P("x", "y")));
  Array w = *device_put(*random::normal(random::key(22), {k, n}, DType::kBF16),
                        NamedSharding(mesh, P("x", None)));
  Results results;
  for (examples::SeedVariant& v : examples::SeedVariants(mesh, k)) {
    for (int run = 0; run < 2; ++run) {
      absl::StatusOr<Array> out = v.program(x, w);
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) continue;
      std::vector<double> values = out->to_host()->ToDoubles();
      auto [it, first] = results.emplace(v.name, values);
      if (!first) {
        EXPECT_EQ(values, it->second) << "variant " << v.name << ", run " << run;
      }
    }
  }
  // A psum and a psum_scatter of bf16 and f32 over every device.
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const PartitionSpec rows = P(Axes{"x", "y"});
    Array a = *device_put(*random::normal(random::key(23), {sx * sy * sx * sy * 3, 37}, dtype),
                          NamedSharding(mesh, rows));
    auto sums = jit(shard_map(
        [](Tracer t) {
          return std::vector<Tracer>{lax::psum(t, {"x", "y"}),
                                     lax::psum_scatter(t, {"x", "y"}, 0, /*tiled=*/true)};
        },
        mesh, {rows}, {P(), rows}, /*check_vma=*/false));
    absl::StatusOr<std::vector<Array>> out = sums(a);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) continue;
    for (int r = 0; r < 2; ++r) {
      results[std::string(ir::DTypeName(dtype)) + " sum " + std::to_string(r)] =
          (*out)[r].to_host()->ToDoubles();
    }
  }
  return results;
}

TEST(Determinism, SeedVariantsAndCollectivesAreBitwiseStableAcrossThreadCounts) {
  for (auto [sx, sy] : {std::pair<int64_t, int64_t>{1, 2}, {2, 2}, {4, 4}}) {
    SCOPED_TRACE(std::to_string(sx) + "x" + std::to_string(sy));
    const Results want = RunSeedVariants(1, sx, sy);
    ASSERT_EQ(want.size(), 8u + 4u);
    for (int threads : {2, 3, 8}) {
      const Results got = RunSeedVariants(threads, sx, sy);
      for (const auto& [name, values] : want) {
        auto it = got.find(name);
        ASSERT_NE(it, got.end()) << name;
        EXPECT_EQ(it->second, values) << name << " with " << threads << " threads";
      }
    }
  }
}

}  // namespace
}  // namespace shardjit
