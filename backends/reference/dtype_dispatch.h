// Calls a generic lambda with a value of the storage type of a dtype.
#ifndef SHARDJIT_BACKENDS_REFERENCE_DTYPE_DISPATCH_H_
#define SHARDJIT_BACKENDS_REFERENCE_DTYPE_DISPATCH_H_

#include <cstdint>
#include <type_traits>

#include "ir/dtype.h"

namespace shardjit::backends::reference {

// Whether storage type T holds a floating dtype (f32, bf16).
template <typename T>
constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, ir::bf16>;

// The type the kernels compute values of storage type T in: f32 for floats (bf16 is widened and
// rounded back once), T itself for s32 and pred.
template <typename T>
using Compute = std::conditional_t<kIsFloat<T>, float, T>;

// Calls f(T{}) with the storage type of `dtype`: float, bf16, int32_t, or uint8_t for pred.
template <typename F>
decltype(auto) Dispatch(ir::DType dtype, F&& f) {
  switch (dtype) {
    case ir::DType::kF32:
      return f(float{});
    case ir::DType::kBF16:
      return f(ir::bf16{});
    case ir::DType::kS32:
      return f(int32_t{});
    case ir::DType::kPred:
    case ir::DType::kInvalid:
      break;
  }
  return f(uint8_t{});
}

}  // namespace shardjit::backends::reference

#endif  // SHARDJIT_BACKENDS_REFERENCE_DTYPE_DISPATCH_H_
