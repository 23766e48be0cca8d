// The loops of the reference elementwise kernels: an op struct gives its function per compute
// type (F<C> on the floating types f32 and f64, I<C> on every integer type, P on pred), and
// Unary/Binary apply it to every element. f16 and bf16 are computed in f32 and rounded once;
// integer arithmetic wraps.
#ifndef SHARDJIT_BACKENDS_REFERENCE_ELEMENTWISE_LOOPS_H_
#define SHARDJIT_BACKENDS_REFERENCE_ELEMENTWISE_LOOPS_H_

#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/reference/dtype_dispatch.h"
#include "backends/reference/kernel.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/dtype.h"
#include "ir/tensor.h"

namespace shardjit::backends::reference::elementwise {

using ir::bf16;
using ir::DType;
using ir::Tensor;
using Results = absl::StatusOr<std::vector<Tensor>>;

inline absl::Status BadDType(const ir::Op& op, DType dtype) {
  return absl::InvalidArgumentError(
      fmt::format("{}: no reference kernel for dtype {}", op.opcode(), ir::DTypeName(dtype)));
}

template <typename T>
inline Compute<T> Load(T x) {
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, ir::f16>) {
    return static_cast<float>(x);
  } else {
    return x;
  }
}

template <typename T>
inline T Store(Compute<T> x) {
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, ir::f16>) {
    return T(x);
  } else {
    return x;
  }
}

// Wrapping integer arithmetic (two's complement, as XLA defines it for every integer width).
template <typename I>
inline I WrapAdd(I a, I b) {
  return static_cast<I>(static_cast<WrapType<I>>(a) + static_cast<WrapType<I>>(b));
}
template <typename I>
inline I WrapSub(I a, I b) {
  return static_cast<I>(static_cast<WrapType<I>>(a) - static_cast<WrapType<I>>(b));
}
template <typename I>
inline I WrapMul(I a, I b) {
  return static_cast<I>(static_cast<WrapType<I>>(a) * static_cast<WrapType<I>>(b));
}

// The op's function for values of type C, or nullptr if it has none.
template <typename Op, typename C>
constexpr auto OpFn() {
  if constexpr (std::is_floating_point_v<C> && requires { &Op::template F<C>; }) {
    return &Op::template F<C>;
  } else if constexpr (kIsInt<C> && requires { &Op::template I<C>; }) {
    return &Op::template I<C>;
  } else if constexpr (std::is_same_v<C, bool> && requires { &Op::P; }) {
    return &Op::P;
  } else {
    return nullptr;
  }
}

template <typename Op>
Results Binary(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  DType dtype = in[0].dtype();
  auto run = [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    constexpr auto fn = OpFn<Op, Compute<T>>();
    if constexpr (std::is_null_pointer_v<std::remove_const_t<decltype(fn)>>) {
      return BadDType(op, dtype);
    } else {
      const T* a = in[0].data_as<T>();
      const T* b = in[1].data_as<T>();
      T* o = out.data_as<T>();
      int64_t n = out.num_elements();
      for (int64_t i = 0; i < n; ++i) o[i] = Store<T>(fn(Load(a[i]), Load(b[i])));
      return absl::OkStatus();
    }
  };
  RETURN_IF_ERROR(Dispatch(dtype, run));
  return std::vector<Tensor>{out};
}

template <typename Op>
Results Unary(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  DType dtype = in[0].dtype();
  auto run = [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    constexpr auto fn = OpFn<Op, Compute<T>>();
    if constexpr (std::is_null_pointer_v<std::remove_const_t<decltype(fn)>>) {
      return BadDType(op, dtype);
    } else {
      const T* x = in[0].data_as<T>();
      T* o = out.data_as<T>();
      int64_t n = out.num_elements();
      for (int64_t i = 0; i < n; ++i) o[i] = Store<T>(fn(Load(x[i])));
      return absl::OkStatus();
    }
  };
  RETURN_IF_ERROR(Dispatch(dtype, run));
  return std::vector<Tensor>{out};
}

}  // namespace shardjit::backends::reference::elementwise

#endif  // SHARDJIT_BACKENDS_REFERENCE_ELEMENTWISE_LOOPS_H_
