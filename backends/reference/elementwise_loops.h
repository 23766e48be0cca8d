// The loops of the reference elementwise kernels: an op struct gives its function per compute
// type (F on f32, I on s32, P on pred), and Unary/Binary apply it to every element. bf16 is
// computed in f32 and rounded once; s32 arithmetic wraps.
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
  if constexpr (std::is_same_v<T, bf16>) {
    return static_cast<float>(x);
  } else {
    return x;
  }
}

template <typename T>
inline T Store(Compute<T> x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return bf16(x);
  } else {
    return x;
  }
}

inline int32_t Wrap(uint32_t x) { return static_cast<int32_t>(x); }

// The op's function for values of type C (f32, s32 or pred), or nullptr if it has none.
template <typename Op, typename C>
constexpr auto BinaryFn() {
  if constexpr (std::is_same_v<C, float> && requires { &Op::F; }) {
    return &Op::F;
  } else if constexpr (std::is_same_v<C, int32_t> && requires { &Op::I; }) {
    return &Op::I;
  } else if constexpr (requires { &Op::P; }) {
    return &Op::P;
  } else {
    return nullptr;
  }
}

template <typename Op, typename C>
constexpr auto UnaryFn() {
  if constexpr (std::is_same_v<C, float> && requires { &Op::F; }) {
    return &Op::F;
  } else if constexpr (std::is_same_v<C, int32_t> && requires { &Op::I; }) {
    return &Op::I;
  } else if constexpr (std::is_same_v<C, uint8_t> && requires { &Op::P; }) {
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
    constexpr auto fn = BinaryFn<Op, Compute<T>>();
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
    constexpr auto fn = UnaryFn<Op, Compute<T>>();
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
