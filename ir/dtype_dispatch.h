// Storage types of the dtypes, and a call of a generic lambda with a dtype's storage type.
#ifndef SHARDJIT_IR_DTYPE_DISPATCH_H_
#define SHARDJIT_IR_DTYPE_DISPATCH_H_

#include <cstdint>
#include <type_traits>

#include "ir/dtype.h"

namespace shardjit::ir {

// The dtype stored as T: float f32, bf16, f16, double f64, bool pred (one byte, 0 or 1), and the
// fixed-width integers.
template <typename T>
constexpr DType kDTypeOf = std::is_same_v<T, float>      ? DType::kF32
                           : std::is_same_v<T, bf16>     ? DType::kBF16
                           : std::is_same_v<T, f16>      ? DType::kF16
                           : std::is_same_v<T, double>   ? DType::kF64
                           : std::is_same_v<T, bool>     ? DType::kPred
                           : std::is_same_v<T, int8_t>   ? DType::kS8
                           : std::is_same_v<T, uint8_t>  ? DType::kU8
                           : std::is_same_v<T, int16_t>  ? DType::kS16
                           : std::is_same_v<T, uint16_t> ? DType::kU16
                           : std::is_same_v<T, int32_t>  ? DType::kS32
                           : std::is_same_v<T, uint32_t> ? DType::kU32
                           : std::is_same_v<T, int64_t>  ? DType::kS64
                           : std::is_same_v<T, uint64_t> ? DType::kU64
                                                         : DType::kInvalid;

// The type values of storage type T are computed in: f32 for the 16-bit floats (widened, and
// rounded back once per operation, as XLA:CPU does), T itself otherwise.
template <typename T>
using ComputeType =
    std::conditional_t<std::is_same_v<T, bf16> || std::is_same_v<T, f16>, float, T>;

// Unsigned arithmetic of integer type I's width, at least 32 bits (so that u16 * u16 does not
// promote to a signed int and overflow): wrapping integer arithmetic converts through it.
template <typename I>
struct WrapTypeOf {
  using type = std::conditional_t<(sizeof(I) < 4), uint32_t, std::make_unsigned_t<I>>;
};
template <typename I>
using WrapType = typename WrapTypeOf<I>::type;

// Calls f(T{}) with the storage type T of `dtype` (bool for pred and for kInvalid).
template <typename F>
decltype(auto) VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32:
      return f(float{});
    case DType::kBF16:
      return f(bf16{});
    case DType::kF16:
      return f(f16{});
    case DType::kF64:
      return f(double{});
    case DType::kS8:
      return f(int8_t{});
    case DType::kU8:
      return f(uint8_t{});
    case DType::kS16:
      return f(int16_t{});
    case DType::kU16:
      return f(uint16_t{});
    case DType::kS32:
      return f(int32_t{});
    case DType::kU32:
      return f(uint32_t{});
    case DType::kS64:
      return f(int64_t{});
    case DType::kU64:
      return f(uint64_t{});
    case DType::kPred:
    case DType::kInvalid:
      break;
  }
  return f(bool{});
}

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_DTYPE_DISPATCH_H_
