// The reference kernels' view of the storage types: which compute type each is evaluated in.
#ifndef SHARDJIT_BACKENDS_REFERENCE_DTYPE_DISPATCH_H_
#define SHARDJIT_BACKENDS_REFERENCE_DTYPE_DISPATCH_H_

#include <cstdint>
#include <type_traits>
#include <utility>

#include "ir/dtype.h"
#include "ir/dtype_dispatch.h"

namespace shardjit::backends::reference {

// Whether storage type T holds a floating dtype (f16, bf16, f32, f64).
template <typename T>
constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                          std::is_same_v<T, ir::bf16> || std::is_same_v<T, ir::f16>;

// Whether storage type T holds an integer dtype (signed or unsigned; not pred).
template <typename T>
constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// The type the kernels compute values of storage type T in (f32 for the 16-bit floats).
template <typename T>
using Compute = ir::ComputeType<T>;

using ir::WrapType;
using ir::WrapTypeOf;

// Calls f(T{}) with the storage type of `dtype` (ir::VisitDType).
template <typename F>
decltype(auto) Dispatch(ir::DType dtype, F&& f) {
  return ir::VisitDType(dtype, std::forward<F>(f));
}

}  // namespace shardjit::backends::reference

#endif  // SHARDJIT_BACKENDS_REFERENCE_DTYPE_DISPATCH_H_
