// fuse-elementwise end to end: a jit program with an MLP-like elementwise tail gives bit-identical
// results with the pass on and off, on the x86 backend (generated fused loops) and the reference
// backend, and the lowered per-device program holds one fusion.
#include <cstring>
#include <string>

#include "backends/x86/cpu_features.h"
#include "backends/x86/elementwise.h"
#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kRows = 30, kCols = 37;  // per device 15x37: not a multiple of 8 lanes

Tracer MlpTail(Tracer x, Tracer w, Tracer b) {
  Tracer h = lax::add(lax::mul(x, w), b);
  Tracer relu = lax::max(h, jnp::broadcast_to(lax::scalar(0, DType::kF32), {kRows, kCols}));
  return lax::convert_element_type(relu, DType::kBF16);
}

struct TailResult {
  Tensor out;
  std::string text;
};

TailResult RunTail(Backend backend, bool fuse) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  NamedSharding rows(mesh, P("x", None));
  Array x = *device_put(*random::normal(random::key(1), {kRows, kCols}, DType::kF32), rows);
  Array w = *device_put(*random::normal(random::key(2), {kRows, kCols}, DType::kF32), rows);
  Array b = *device_put(*random::normal(random::key(3), {kRows, kCols}, DType::kF32), rows);
  JitOptions options;
  options.backend = backend;
  if (!fuse) options.pipeline.disabled = {"fuse-elementwise"};
  auto f = jit(MlpTail, options);
  auto lowered = f.lower(x, w, b);
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  absl::StatusOr<Array> out = f(x, w, b);
  EXPECT_TRUE(out.ok()) << out.status();
  return {*out->to_host(), lowered->as_text()};
}

void ExpectSameBits(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.type(), b.type());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.byte_size()), 0);
}

TEST(FusionEndToEndTest, SameResultWithFusionOnAndOff) {
  const int64_t runs_before = backends::x86::GetElementwiseStats().runs;
  TailResult fused = RunTail(Backend::kX86, /*fuse=*/true);
  TailResult unfused = RunTail(Backend::kX86, /*fuse=*/false);
  TailResult reference = RunTail(Backend::kReference, /*fuse=*/true);
  EXPECT_THAT(fused.text, HasSubstr("= fusion[body="));
  EXPECT_THAT(unfused.text, Not(HasSubstr("fusion")));
  EXPECT_EQ(fused.out.type(), (ShapedType{DType::kBF16, {kRows, kCols}}));
  ExpectSameBits(fused.out, unfused.out);
  ExpectSameBits(reference.out, unfused.out);
  if (backends::x86::ActiveIsa() >= backends::x86::IsaLevel::kAvx2) {
    EXPECT_GT(backends::x86::GetElementwiseStats().runs, runs_before);
  }
}

}  // namespace
}  // namespace shardjit
