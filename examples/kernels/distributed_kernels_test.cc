// Kernels that talk between devices (remote copies and semaphores), on both backends (compiled
// on x86) and on one and two scheduler threads: seed 000's ring all-gather on 1-D and 2-D meshes
// against the array itself and the built-in all_gather, seed 001's collective matmul kernel on
// rings of 2, 4, 8 and over either axis of 2-D meshes against f64 and the built-in
// all_gather + dot.
#include <cmath>
#include <string>
#include <vector>

#include "backends/x86/pallas_call.h"
#include "examples/kernels/collective_matmul.h"
#include "examples/kernels/ring_all_gather.h"
#include "fmt/format.h"
#include "gtest/gtest.h"

namespace shardjit::examples {
namespace {

struct MeshCase {
  std::vector<std::pair<std::string, int64_t>> axes;
  std::string ring;
  Backend backend;
  int threads;
};

std::string Name(const ::testing::TestParamInfo<MeshCase>& info) {
  std::string name;
  for (const auto& [axis, size] : info.param.axes) name += fmt::format("{}{}", axis, size);
  return fmt::format("{}_ring_{}_{}_{}threads", name, info.param.ring,
                     info.param.backend == Backend::kX86 ? "x86" : "reference",
                     info.param.threads);
}

class DistributedKernelTest : public ::testing::TestWithParam<MeshCase> {
 protected:
  void SetUp() override {
    int64_t devices = 1;
    for (const auto& [axis, size] : GetParam().axes) devices *= size;
    rt_ = std::make_unique<Runtime>(RuntimeOptions{.num_devices = static_cast<int>(devices),
                                                   .num_threads = GetParam().threads});
    mesh_ = *make_mesh(*rt_, GetParam().axes);
  }
  // On x86, every device's call since `before` ran compiled, none interpreted.
  void ExpectCompiled(const backends::x86::PallasCallStats& before) {
    if (GetParam().backend != Backend::kX86) return;
    const backends::x86::PallasCallStats now = backends::x86::GetPallasCallStats();
    EXPECT_GT(now.compiled, before.compiled);
    EXPECT_EQ(now.interpreted, before.interpreted);
  }

  std::unique_ptr<Runtime> rt_;
  std::optional<Mesh> mesh_;
};

TEST_P(DistributedKernelTest, RingAllGatherGathersEveryBlock) {
  const MeshCase& c = GetParam();
  const int64_t n = mesh_->axis_size(c.ring);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(ir::DTypeName(dtype));
    const int64_t h = 3, w = 5;
    Tensor host = *random::normal(random::key(7), {n * h, w}, dtype);
    Array x = *device_put(host, NamedSharding(*mesh_, P(c.ring, None)));
    const backends::x86::PallasCallStats before = backends::x86::GetPallasCallStats();
    absl::StatusOr<Array> got =
        RingAllGatherProgram(*mesh_, c.ring, {.backend = c.backend})(x);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectCompiled(before);
    // Every device holds the whole array.
    for (const Tensor& shard : got->shards()) EXPECT_EQ(shard.ToDoubles(), host.ToDoubles());
    auto builtin = jit(shard_map([&](Tracer t) { return lax::all_gather(t, c.ring, 0, true); },
                                 *mesh_, {P(c.ring, None)}, {P(None, None)}, /*check_vma=*/false),
                       {.backend = c.backend});
    EXPECT_EQ(got->to_host()->ToDoubles(), (*builtin(x)).to_host()->ToDoubles());
  }
}

TEST_P(DistributedKernelTest, CollectiveMatmulKernelMatchesF64AndTheBuiltIn) {
  const MeshCase& c = GetParam();
  const int64_t n = mesh_->axis_size(c.ring);
  absl::StatusOr<Jitted<Array>> program =
      CollectiveMatmulKernelProgram(*mesh_, c.ring, {.backend = c.backend});
  if (n % 2 != 0) {
    ASSERT_FALSE(program.ok());
    EXPECT_NE(program.status().message().find("even ring"), std::string::npos)
        << program.status();
    return;
  }
  ASSERT_TRUE(program.ok()) << program.status();
  const int64_t m = 7, ks = 6, cols = 9;
  Tensor xh = *random::normal(random::key(8), {m, n * ks}, DType::kBF16);
  Tensor wh = *random::normal(random::key(9), {n * ks, cols}, DType::kBF16);
  Array x = *device_put(xh, NamedSharding(*mesh_, P(None, c.ring)));
  Array w = *device_put(wh, NamedSharding(*mesh_, P()));
  const backends::x86::PallasCallStats before = backends::x86::GetPallasCallStats();
  absl::StatusOr<Array> got = (*program)(x, w);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectCompiled(before);
  const std::vector<double> xd = xh.ToDoubles(), wd = wh.ToDoubles();
  for (const Tensor& shard : got->shards()) {
    ASSERT_EQ(shard.type(), (ShapedType{DType::kF32, {m, cols}}));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        double want = 0;
        for (int64_t l = 0; l < n * ks; ++l) want += xd[i * n * ks + l] * wd[l * cols + j];
        ASSERT_NEAR(shard.GetDouble(i * cols + j), want, 1e-4 + 1e-5 * std::abs(want))
            << "element " << i << "," << j;
      }
    }
  }
  auto builtin = jit(shard_map(
                         [&](Tracer a, Tracer b) {
                           return lax::dot_general(lax::all_gather(a, c.ring, 1, true), b,
                                                   DotDims{{1}, {0}}, DType::kF32);
                         },
                         *mesh_, {P(None, c.ring), P()}, {P()}, /*check_vma=*/false),
                     {.backend = c.backend});
  const std::vector<double> want = (*builtin(x, w)).to_host()->ToDoubles();
  const std::vector<double> kernel = got->to_host()->ToDoubles();
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(kernel[i], want[i], 1e-4 + 1e-5 * std::abs(want[i])) << "element " << i;
  }
}

std::vector<MeshCase> Cases() {
  std::vector<MeshCase> cases;
  for (Backend backend : {Backend::kReference, Backend::kX86}) {
    for (int threads : {1, 2}) {
      cases.push_back({{{"i", 2}}, "i", backend, threads});
      cases.push_back({{{"i", 3}}, "i", backend, threads});
      cases.push_back({{{"i", 4}}, "i", backend, threads});
      cases.push_back({{{"i", 8}}, "i", backend, threads});
      cases.push_back({{{"x", 2}, {"y", 2}}, "x", backend, threads});
      cases.push_back({{{"x", 2}, {"y", 4}}, "y", backend, threads});
      cases.push_back({{{"x", 4}, {"y", 2}}, "x", backend, threads});
      cases.push_back({{{"x", 4}, {"y", 4}}, "y", backend, threads});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Meshes, DistributedKernelTest, ::testing::ValuesIn(Cases()), Name);

}  // namespace
}  // namespace shardjit::examples
