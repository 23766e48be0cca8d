// Reference kernels of the elementwise primitives (XLA CPU semantics): arithmetic, transcendental
// functions, compare, select, clamp, convert_element_type and bitcast_convert_type. bf16 is computed in f32 and rounded once;
// s32 arithmetic wraps.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "backends/reference/dtype_dispatch.h"
#include "backends/reference/elementwise_loops.h"
#include "backends/reference/kernel.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/dtype.h"
#include "ir/tensor.h"

namespace shardjit::backends::reference {
namespace {

using elementwise::Binary;
using elementwise::Load;
using elementwise::Results;
using elementwise::Unary;
using elementwise::Wrap;
using ir::bf16;
using ir::DType;
using ir::Tensor;

template <typename T>
T MaxOf(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return a > b ? a : b;
}

template <typename T>
T MinOf(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return a < b ? a : b;
}

// Binary operations: F on f32, I on s32, P on pred where the op allows pred.
struct AddOp {
  static float F(float a, float b) { return a + b; }
  static int32_t I(int32_t a, int32_t b) { return Wrap(uint32_t(a) + uint32_t(b)); }
};
struct SubOp {
  static float F(float a, float b) { return a - b; }
  static int32_t I(int32_t a, int32_t b) { return Wrap(uint32_t(a) - uint32_t(b)); }
};
struct MulOp {
  static float F(float a, float b) { return a * b; }
  static int32_t I(int32_t a, int32_t b) { return Wrap(uint32_t(a) * uint32_t(b)); }
};
struct DivOp {
  static float F(float a, float b) { return a / b; }
  static int32_t I(int32_t a, int32_t b) {
    if (b == 0) return -1;
    if (a == std::numeric_limits<int32_t>::min() && b == -1) return a;
    return a / b;
  }
};
struct RemOp {
  static float F(float a, float b) { return std::fmod(a, b); }
  static int32_t I(int32_t a, int32_t b) {
    if (b == 0) return a;
    if (b == -1) return 0;
    return a % b;
  }
};
struct MaxOp {
  static float F(float a, float b) { return MaxOf(a, b); }
  static int32_t I(int32_t a, int32_t b) { return MaxOf(a, b); }
  static uint8_t P(uint8_t a, uint8_t b) { return a | b; }
};
struct MinOp {
  static float F(float a, float b) { return MinOf(a, b); }
  static int32_t I(int32_t a, int32_t b) { return MinOf(a, b); }
  static uint8_t P(uint8_t a, uint8_t b) { return a & b; }
};

// Unary operations: F on f32, I on s32 where the op allows integers.
struct NegOp {
  static float F(float x) { return -x; }
  static int32_t I(int32_t x) { return Wrap(0u - uint32_t(x)); }
};
struct AbsOp {
  static float F(float x) { return std::fabs(x); }
  static int32_t I(int32_t x) { return x < 0 ? NegOp::I(x) : x; }
};
struct ExpOp {
  static float F(float x) { return std::exp(x); }
};
struct LogOp {
  static float F(float x) { return std::log(x); }
};
struct TanhOp {
  static float F(float x) { return std::tanh(x); }
};
struct SqrtOp {
  static float F(float x) { return std::sqrt(x); }
};
struct RsqrtOp {
  static float F(float x) { return 1.0f / std::sqrt(x); }
};
struct LogisticOp {
  static float F(float x) { return 1.0f / (1.0f + std::exp(-x)); }
};

template <typename T, typename Cmp>
void CompareLoop(const Tensor& a, const Tensor& b, Tensor& out, Cmp cmp) {
  const T* x = a.data_as<T>();
  const T* y = b.data_as<T>();
  uint8_t* o = out.data_as<uint8_t>();
  int64_t n = out.num_elements();
  for (int64_t i = 0; i < n; ++i) o[i] = cmp(Load(x[i]), Load(y[i])) ? 1 : 0;
}

Results Compare(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  ir::ComparisonDirection direction = op.compare().direction();
  auto run = [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    switch (direction) {
      case ir::EQ:
        CompareLoop<T>(in[0], in[1], out, [](auto a, auto b) { return a == b; });
        return absl::OkStatus();
      case ir::NE:
        CompareLoop<T>(in[0], in[1], out, [](auto a, auto b) { return a != b; });
        return absl::OkStatus();
      case ir::LT:
        CompareLoop<T>(in[0], in[1], out, [](auto a, auto b) { return a < b; });
        return absl::OkStatus();
      case ir::LE:
        CompareLoop<T>(in[0], in[1], out, [](auto a, auto b) { return a <= b; });
        return absl::OkStatus();
      case ir::GT:
        CompareLoop<T>(in[0], in[1], out, [](auto a, auto b) { return a > b; });
        return absl::OkStatus();
      case ir::GE:
        CompareLoop<T>(in[0], in[1], out, [](auto a, auto b) { return a >= b; });
        return absl::OkStatus();
      default:
        return absl::InvalidArgumentError("compare: direction is not set");
    }
  };
  RETURN_IF_ERROR(Dispatch(in[0].dtype(), run));
  return std::vector<Tensor>{out};
}

// Unsigned integer of `bytes` bytes: select only moves elements.
template <typename F>
void DispatchBytes(int64_t bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    default:
      return f(uint32_t{});
  }
}

Results Select(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const Tensor& pred = in[0];
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  if (out.byte_size() == 0) return std::vector<Tensor>{out};
  if (pred.dims().empty()) {
    const Tensor& chosen = pred.data_as<uint8_t>()[0] ? in[1] : in[2];
    std::memcpy(out.data(), chosen.data(), out.byte_size());
    return std::vector<Tensor>{out};
  }
  DispatchBytes(ir::DTypeSize(out.dtype()), [&](auto tag) {
    using U = decltype(tag);
    const uint8_t* p = pred.data_as<uint8_t>();
    const U* t = in[1].data_as<U>();
    const U* f = in[2].data_as<U>();
    U* o = out.data_as<U>();
    int64_t n = out.num_elements();
    for (int64_t i = 0; i < n; ++i) o[i] = p[i] ? t[i] : f[i];
  });
  return std::vector<Tensor>{out};
}

// clamp(min, x, max) = min(max(x, min), max) with max and min's NaN rules; the bounds may be
// scalars.
Results Clamp(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const Tensor& x = in[1];
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  const int64_t n = out.num_elements();
  const int64_t lo_step = in[0].dims().empty() ? 0 : 1;
  const int64_t hi_step = in[2].dims().empty() ? 0 : 1;
  Dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    const T* lo = in[0].data_as<T>();
    const T* v = x.data_as<T>();
    const T* hi = in[2].data_as<T>();
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < n; ++i) {
      o[i] = T(MinOf<C>(MaxOf<C>(C(v[i]), C(lo[i * lo_step])), C(hi[i * hi_step])));
    }
  });
  return std::vector<Tensor>{out};
}

// The operand's bytes, read as the result's dtype (the shape rule checks the widths agree).
Results BitcastConvertType(const ir::Op& op, const std::vector<Tensor>& in,
                           ir::Allocator* allocator) {
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  if (out.byte_size() > 0) std::memcpy(out.data(), in[0].data(), out.byte_size());
  return std::vector<Tensor>{out};
}

// Float to s32: truncation toward zero, NaN to 0, saturating at the int32 limits.
int32_t FloatToS32(float x) {
  if (std::isnan(x)) return 0;
  if (x <= -2147483648.0f) return std::numeric_limits<int32_t>::min();
  if (x >= 2147483648.0f) return std::numeric_limits<int32_t>::max();
  return static_cast<int32_t>(x);
}

template <typename To, typename From>
To ConvertOne(From x) {
  auto v = Load(x);  // float, int32_t or uint8_t (0/1)
  if constexpr (std::is_same_v<To, uint8_t>) {
    return v != 0 ? 1 : 0;
  } else if constexpr (std::is_same_v<To, int32_t>) {
    if constexpr (std::is_same_v<decltype(v), float>) {
      return FloatToS32(v);
    } else {
      return static_cast<int32_t>(v);
    }
  } else if constexpr (std::is_same_v<To, bf16>) {
    // s32 -> bf16 rounds through f32, like XLA's CPU emitter.
    return bf16(static_cast<float>(v));
  } else {
    return static_cast<float>(v);
  }
}

Results ConvertElementType(const ir::Op& op, const std::vector<Tensor>& in,
                           ir::Allocator* allocator) {
  const Tensor& x = in[0];
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  int64_t n = out.num_elements();
  if (x.dtype() == out.dtype()) {
    if (n > 0) std::memcpy(out.data(), x.data(), out.byte_size());
    return std::vector<Tensor>{out};
  }
  Dispatch(x.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    Dispatch(out.dtype(), [&](auto to_tag) {
      using To = decltype(to_tag);
      const From* src = x.data_as<From>();
      To* dst = out.data_as<To>();
      for (int64_t i = 0; i < n; ++i) dst[i] = ConvertOne<To>(src[i]);
    });
  });
  return std::vector<Tensor>{out};
}

const bool registered = [] {
  RegisterKernel("add", Binary<AddOp>);
  RegisterKernel("sub", Binary<SubOp>);
  RegisterKernel("mul", Binary<MulOp>);
  RegisterKernel("div", Binary<DivOp>);
  RegisterKernel("rem", Binary<RemOp>);
  RegisterKernel("max", Binary<MaxOp>);
  RegisterKernel("min", Binary<MinOp>);
  RegisterKernel("neg", Unary<NegOp>);
  RegisterKernel("abs", Unary<AbsOp>);
  RegisterKernel("exp", Unary<ExpOp>);
  RegisterKernel("log", Unary<LogOp>);
  RegisterKernel("tanh", Unary<TanhOp>);
  RegisterKernel("sqrt", Unary<SqrtOp>);
  RegisterKernel("rsqrt", Unary<RsqrtOp>);
  RegisterKernel("logistic", Unary<LogisticOp>);
  RegisterKernel("compare", Compare);
  RegisterKernel("select", Select);
  RegisterKernel("clamp", Clamp);
  RegisterKernel("bitcast_convert_type", BitcastConvertType);
  RegisterKernel("convert_element_type", ConvertElementType);
  return true;
}();

}  // namespace
}  // namespace shardjit::backends::reference
