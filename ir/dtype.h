// Element types and the bfloat16 storage type.
#ifndef SHARDJIT_IR_DTYPE_H_
#define SHARDJIT_IR_DTYPE_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace shardjit::ir {

// Numbering matches DTypeProto in ir.proto.
enum class DType : int { kInvalid = 0, kF32 = 1, kBF16 = 2, kS32 = 3, kPred = 4 };

// Bytes per element.
int64_t DTypeSize(DType dtype);
// "f32", "bf16", "s32", "pred" ("invalid" otherwise).
std::string_view DTypeName(DType dtype);
std::optional<DType> ParseDType(std::string_view name);
bool IsFloating(DType dtype);

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

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_DTYPE_H_
