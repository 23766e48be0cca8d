// Element types and the 16-bit float storage types.
#ifndef SHARDJIT_IR_DTYPE_H_
#define SHARDJIT_IR_DTYPE_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace shardjit::ir {

// Numbering matches DTypeProto in ir.proto.
enum class DType : int {
  kInvalid = 0,
  kF32 = 1,
  kBF16 = 2,
  kS32 = 3,
  kPred = 4,
  kF16 = 5,
  kF64 = 6,
  kS8 = 7,
  kU8 = 8,
  kS16 = 9,
  kU16 = 10,
  kS64 = 11,
  kU32 = 12,
  kU64 = 13,
};

// Every valid dtype, in enum order.
inline constexpr std::array<DType, 13> kAllDTypes = {
    DType::kF32, DType::kBF16, DType::kS32, DType::kPred, DType::kF16, DType::kF64, DType::kS8,
    DType::kU8,  DType::kS16,  DType::kU16, DType::kS64,  DType::kU32, DType::kU64};

// Bytes per element (0 for kInvalid).
int64_t DTypeSize(DType dtype);
// "f32", "bf16", "s32", "pred", "f16", "f64", "s8", "u8", "s16", "u16", "s64", "u32", "u64"
// ("invalid" otherwise).
std::string_view DTypeName(DType dtype);
std::optional<DType> ParseDType(std::string_view name);
// f16, bf16, f32, f64.
bool IsFloating(DType dtype);
// s8, s16, s32, s64.
bool IsSignedInteger(DType dtype);
// u8, u16, u32, u64.
bool IsUnsignedInteger(DType dtype);
// Signed or unsigned integer (not pred).
bool IsInteger(DType dtype);

// bfloat16: the upper 16 bits of an IEEE f32. Conversion from f32 rounds to nearest even.
struct bf16 {
  uint16_t bits = 0;

  bf16() = default;
  explicit bf16(float f) : bits(FromFloat(f)) {}
  explicit operator float() const { return ToFloat(bits); }

  static uint16_t FromFloat(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>((u + rounding) >> 16);
  }
  static float ToFloat(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// IEEE binary16. Conversions from f32 and f64 round to nearest even once (no double rounding),
// overflow to inf, keep subnormals, and keep NaN quiet.
struct f16 {
  uint16_t bits = 0;

  f16() = default;
  explicit f16(float f) : bits(FromDouble(f)) {}
  explicit f16(double d) : bits(FromDouble(d)) {}
  explicit operator float() const { return ToFloat(bits); }

  static uint16_t FromDouble(double d);
  static float ToFloat(uint16_t h);
};

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_DTYPE_H_
