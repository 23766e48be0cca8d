#include "ir/dtype.h"

#include <cmath>

namespace shardjit::ir {

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kS64:
    case DType::kU64:
      return 8;
    case DType::kF32:
    case DType::kS32:
    case DType::kU32:
      return 4;
    case DType::kBF16:
    case DType::kF16:
    case DType::kS16:
    case DType::kU16:
      return 2;
    case DType::kPred:
    case DType::kS8:
    case DType::kU8:
      return 1;
    case DType::kInvalid:
      break;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kS32:
      return "s32";
    case DType::kPred:
      return "pred";
    case DType::kF16:
      return "f16";
    case DType::kF64:
      return "f64";
    case DType::kS8:
      return "s8";
    case DType::kU8:
      return "u8";
    case DType::kS16:
      return "s16";
    case DType::kU16:
      return "u16";
    case DType::kS64:
      return "s64";
    case DType::kU32:
      return "u32";
    case DType::kU64:
      return "u64";
    case DType::kInvalid:
      break;
  }
  return "invalid";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (DType d : kAllDTypes) {
    if (DTypeName(d) == name) return d;
  }
  return std::nullopt;
}

bool IsFloating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16 ||
         dtype == DType::kF64;
}

bool IsSignedInteger(DType dtype) {
  return dtype == DType::kS8 || dtype == DType::kS16 || dtype == DType::kS32 ||
         dtype == DType::kS64;
}

bool IsUnsignedInteger(DType dtype) {
  return dtype == DType::kU8 || dtype == DType::kU16 || dtype == DType::kU32 ||
         dtype == DType::kU64;
}

bool IsInteger(DType dtype) { return IsSignedInteger(dtype) || IsUnsignedInteger(dtype); }

uint16_t f16::FromDouble(double d) {
  const uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  if (std::isnan(d)) return sign | 0x7e00;
  const double a = std::fabs(d);
  // 65520 = the largest f16 (65504) plus half its ulp: from there on, round to nearest gives inf.
  if (a >= 65520.0) return sign | 0x7c00;
  if (a < 0x1p-14) {
    // Subnormal (or zero): units of 2^-24, rounded to nearest even by nearbyint.
    return sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p24));
  }
  int exp;
  const double m = std::frexp(a, &exp);  // a = m * 2^exp, m in [0.5, 1)
  // 11 significant bits: the integer significand in [1024, 2048], rounded to nearest even.
  const double sig = std::nearbyint(std::ldexp(m, 11));
  // A carry to 2048 moves into the next binade; adding the fields handles it.
  const uint32_t biased = static_cast<uint32_t>(exp - 1 + 15);
  return sign | static_cast<uint16_t>((biased << 10) + (static_cast<uint32_t>(sig) - 1024));
}

float f16::ToFloat(uint16_t h) {
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  const int exp = (h >> 10) & 0x1f;
  const int frac = h & 0x3ff;
  if (exp == 0x1f) {
    return frac == 0 ? sign * INFINITY : std::copysign(NAN, sign);
  }
  if (exp == 0) return sign * std::ldexp(static_cast<float>(frac), -24);
  return sign * std::ldexp(static_cast<float>(frac + 1024), exp - 25);
}

}  // namespace shardjit::ir
