// Accuracy of the generated exp, log, tanh, logistic, erf, sin and cos against glibc (what the
// reference kernels call), and exactness of floor, ceil, round (both methods) and sign: a strided
// sweep over every f32 bit pattern (subnormals, +-inf, NaNs, huge magnitudes), dense windows around
// the points where the approximations switch or overflow, and every bf16 input; within the bounds
// of elementwise_kernel.h. NaN must give NaN. Arguments beyond sin's and cos's range must make the
// call report them.
// SHARDJIT_ULP_SWEEP_STRIDE=1 makes the f32 sweep exhaustive (about a minute per function).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/x86/cpu_features.h"
#include "backends/x86/elementwise_kernel.h"
#include "backends/x86/elementwise_test_util.h"
#include "backends/x86/isa_test_util.h"
#include "gtest/gtest.h"

namespace shardjit::backends::x86 {
namespace {

using ir::DType;

struct MathCase {
  const char* name;
  EwOp op;
  float (*want)(float);
  int max_ulp;
  // Finite inputs of larger magnitude make the kernel report them (Run returns false).
  float max_argument = INFINITY;
};

bool Beyond(const MathCase& c, float x) {
  return std::isfinite(x) && std::fabs(x) > c.max_argument;
}

float Exp(float x) { return std::exp(x); }
float Log(float x) { return std::log(x); }
float Tanh(float x) { return std::tanh(x); }
float Logistic(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float Erf(float x) { return std::erf(x); }
float Sin(float x) { return std::sin(x); }
float Cos(float x) { return std::cos(x); }
float Floor(float x) { return std::floor(x); }
float Ceil(float x) { return std::ceil(x); }
float RoundAway(float x) { return std::round(x); }
float RoundEven(float x) { return std::nearbyint(x); }
float Sign(float x) { return std::isnan(x) || x == 0 ? x : std::copysign(1.0f, x); }

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::unique_ptr<ElementwiseKernel> UnaryKernel(EwOp op, DType dtype, IsaLevel isa) {
  ElementwisePlan plan;
  plan.inputs = {{dtype, false}};
  plan.steps = {{op, 0, -1, -1, dtype}};
  plan.result = 1;
  plan.result_dtype = dtype;
  std::unique_ptr<ElementwiseKernel> kernel = NewElementwiseKernel(plan, isa);
  EXPECT_TRUE(kernel->status().ok()) << kernel->status();
  EXPECT_TRUE(kernel->Create().ok());
  return kernel;
}

// Inputs beyond the strided sweep: special values and windows of consecutive floats.
std::vector<float> HandPicked() {
  std::vector<float> x = {0.0f,   -0.0f,  INFINITY,      -INFINITY,      NAN,
                          -NAN,   1e-45f, -1e-45f,       3.4028235e38f,  -3.4028235e38f,
                          FromBits(0x7f800001), FromBits(0xff812345)};
  for (float center : {1.0f, 0.625f, -0.625f, 88.7228f, -87.3365f, -103.972f, 1.17549435e-38f,
                       0.5f, 2.0f, 9.0f, 1.5f, -2.5f, 8388607.5f, -4194303.5f, 0.785398f,
                       -2.35619f, 3.14159f, 0x1p-12f, 71476.0625f, -71476.0625f, 51472.f}) {
    float v = center;
    for (int i = 0; i < 2048; ++i) v = std::nextafter(v, -INFINITY);
    for (int i = 0; i < 4096; ++i, v = std::nextafter(v, INFINITY)) x.push_back(v);
  }
  return x;
}

class MathTest : public ::testing::TestWithParam<MathCase> {};

TEST_P(MathTest, F32WithinBound) {
  const MathCase& c = GetParam();
  const char* env = std::getenv("SHARDJIT_ULP_SWEEP_STRIDE");
  const uint64_t stride = env != nullptr ? std::strtoull(env, nullptr, 10) : 257;
  for (IsaLevel isa : HostIsaLevels()) {
    if (isa < IsaLevel::kAvx2) continue;
    std::unique_ptr<ElementwiseKernel> kernel = UnaryKernel(c.op, DType::kF32, isa);
    int64_t worst = 0;
    float worst_x = 0;
    std::vector<float> got;
    auto check = [&](const std::vector<float>& all) {
      // Inputs beyond the op's range make the whole call report them; the rest run through.
      std::vector<float> x;
      bool beyond = false;
      for (float v : all) {
        if (Beyond(c, v)) {
          beyond = true;
        } else {
          x.push_back(v);
        }
      }
      if (beyond) {
        got.resize(all.size());
        EXPECT_FALSE(kernel->Run({all.data()}, got.data(), static_cast<int64_t>(all.size())));
      }
      got.resize(x.size());
      EXPECT_TRUE(kernel->Run({x.data()}, got.data(), static_cast<int64_t>(x.size())));
      for (size_t i = 0; i < x.size(); ++i) {
        const int64_t ulp = UlpDistance(got[i], c.want(x[i]));
        if (ulp > worst) {
          worst = ulp;
          worst_x = x[i];
        }
      }
    };
    check(HandPicked());
    std::vector<float> chunk;
    for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += stride) {
      chunk.push_back(FromBits(static_cast<uint32_t>(bits)));
      if (chunk.size() == (1 << 20)) {
        check(chunk);
        chunk.clear();
      }
    }
    check(chunk);
    std::printf("%s f32 %s: max %lld ulp (at %a), stride %llu\n", c.name,
                std::string(IsaName(isa)).c_str(), static_cast<long long>(worst), worst_x,
                static_cast<unsigned long long>(stride));
    EXPECT_LE(worst, c.max_ulp) << c.name << " at x = " << worst_x;
  }
}

TEST_P(MathTest, EveryBf16InputWithinOneUlp) {
  const MathCase& c = GetParam();
  for (IsaLevel isa : HostIsaLevels()) {
    if (isa < IsaLevel::kAvx2) continue;
    std::unique_ptr<ElementwiseKernel> kernel = UnaryKernel(c.op, DType::kBF16, isa);
    std::vector<uint16_t> x;
    for (uint32_t i = 0; i < (1 << 16); ++i) {
      if (!Beyond(c, ir::bf16::ToFloat(static_cast<uint16_t>(i)))) x.push_back(i);
    }
    std::vector<uint16_t> got(x.size());
    EXPECT_TRUE(kernel->Run({x.data()}, got.data(), static_cast<int64_t>(x.size())));
    for (uint32_t i = 0; i < x.size(); ++i) {
      const uint16_t want = ir::bf16::FromFloat(c.want(ir::bf16::ToFloat(x[i])));
      ASSERT_LE(UlpDistanceBf16(got[i], want), 1) << c.name << " at bf16 bits " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transcendentals, MathTest,
                         ::testing::Values(MathCase{"exp", EwOp::kExp, Exp, kExpMaxUlp},
                                           MathCase{"log", EwOp::kLog, Log, kLogMaxUlp},
                                           MathCase{"tanh", EwOp::kTanh, Tanh, kTanhMaxUlp},
                                           MathCase{"logistic", EwOp::kLogistic, Logistic,
                                                    kLogisticMaxUlp},
                                           MathCase{"erf", EwOp::kErf, Erf, kErfMaxUlp},
                                           MathCase{"sin", EwOp::kSin, Sin, kSinMaxUlp,
                                                    kSinCosMaxArgument},
                                           MathCase{"cos", EwOp::kCos, Cos, kCosMaxUlp,
                                                    kSinCosMaxArgument},
                                           MathCase{"floor", EwOp::kFloor, Floor, 0},
                                           MathCase{"ceil", EwOp::kCeil, Ceil, 0},
                                           MathCase{"round_away", EwOp::kRoundAway, RoundAway, 0},
                                           MathCase{"round_even", EwOp::kRoundEven, RoundEven, 0},
                                           MathCase{"sign", EwOp::kSign, Sign, 0}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace shardjit::backends::x86
