// Dtype names and sizes, and the f16 conversions against the F16C instructions (where the CPU has
// them) and hand-derived ties.
#include "ir/dtype.h"

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "gtest/gtest.h"
#include "ir/dtype_dispatch.h"

namespace shardjit::ir {
namespace {

TEST(DType, NamesSizesAndKinds) {
  for (DType d : kAllDTypes) {
    EXPECT_EQ(ParseDType(DTypeName(d)), d);
    VisitDType(d, [&](auto tag) {
      EXPECT_EQ(DTypeSize(d), static_cast<int64_t>(sizeof(tag))) << DTypeName(d);
      EXPECT_EQ(kDTypeOf<decltype(tag)>, d);
    });
    const int kinds = IsFloating(d) + IsSignedInteger(d) + IsUnsignedInteger(d) + (d == DType::kPred);
    EXPECT_EQ(kinds, 1) << DTypeName(d);
  }
  EXPECT_EQ(ParseDType("f8"), std::nullopt);
  EXPECT_EQ(DTypeName(DType::kInvalid), "invalid");
}

__attribute__((target("f16c"))) float HardwareToFloat(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) uint16_t HardwareFromFloat(float f) {
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

TEST(F16, ConversionsMatchF16c) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C on this CPU";
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float got = f16::ToFloat(static_cast<uint16_t>(h));
    const float want = HardwareToFloat(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      continue;
    }
    ASSERT_EQ(std::signbit(got), std::signbit(want)) << h;
    ASSERT_EQ(got, want) << h;
    // Every f16 and the floats around it (halfway points included) round as F16C does.
    for (float x : {want, std::nextafter(want, INFINITY), std::nextafter(want, -INFINITY),
                    want * (1 + 0x1p-11f), want * (1 + 0x1p-12f), want * (1 - 0x1p-12f),
                    want * (1 + 0x1.8p-11f)}) {
      ASSERT_EQ(f16(x).bits, HardwareFromFloat(x)) << h << " " << x;
    }
  }
}

TEST(F16, FromDoubleRoundsOnce) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1). A double just above it
  // rounds up; through f32 the excess (2^-40) would vanish first and the tie go to 1.
  EXPECT_EQ(f16(1.0 + 0x1p-11).bits, 0x3c00);
  EXPECT_EQ(f16(1.0 + 0x1p-11 + 0x1p-40).bits, 0x3c01);
  EXPECT_EQ(f16(1.0 + 0x1.8p-10).bits, 0x3c02);  // halfway between 0x3c01 and 0x3c02: even
  // Overflow: 65504 is the largest f16; from 65520 on, round to nearest gives inf.
  EXPECT_EQ(f16(65519.999).bits, 0x7bff);
  EXPECT_EQ(f16(65520.0).bits, 0x7c00);
  EXPECT_EQ(f16(-1e300).bits, 0xfc00);
  // Subnormals: 2^-24 is the smallest; half of it ties to 0, a bit more rounds up.
  EXPECT_EQ(f16(0x1p-24).bits, 0x0001);
  EXPECT_EQ(f16(0x1p-25).bits, 0x0000);
  EXPECT_EQ(f16(0x1p-25 + 0x1p-60).bits, 0x0001);
  EXPECT_EQ(f16(-0.0).bits, 0x8000);
  // The largest subnormal plus half an ulp ties to the smallest normal (even).
  EXPECT_EQ(f16(0x3ffp-24 + 0x1p-25).bits, 0x0400);
  EXPECT_TRUE(std::isnan(static_cast<float>(f16(std::numeric_limits<double>::quiet_NaN()))));
}

}  // namespace
}  // namespace shardjit::ir
