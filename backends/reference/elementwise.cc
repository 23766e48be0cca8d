// Reference kernels of the elementwise primitives (XLA CPU semantics): arithmetic, transcendental
// functions, compare, select, clamp, convert_element_type and bitcast_convert_type. f16 and bf16
// are computed in f32 and rounded once; integer arithmetic wraps.
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
using elementwise::WrapAdd;
using elementwise::WrapMul;
using elementwise::WrapSub;
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

// Binary operations: F on floats, I on integers (XLA's wrapping and division-by-zero results), P on
// pred where the op allows pred.
struct AddOp {
  template <typename C>
  static C F(C a, C b) { return a + b; }
  template <typename C>
  static C I(C a, C b) { return WrapAdd(a, b); }
};
struct SubOp {
  template <typename C>
  static C F(C a, C b) { return a - b; }
  template <typename C>
  static C I(C a, C b) { return WrapSub(a, b); }
};
struct MulOp {
  template <typename C>
  static C F(C a, C b) { return a * b; }
  template <typename C>
  static C I(C a, C b) { return WrapMul(a, b); }
};
struct DivOp {
  template <typename C>
  static C F(C a, C b) { return a / b; }
  // x / 0 is -1 (all ones); the signed minimum / -1 is the minimum.
  template <typename C>
  static C I(C a, C b) {
    if (b == 0) return static_cast<C>(-1);
    if constexpr (std::is_signed_v<C>) {
      if (a == std::numeric_limits<C>::min() && b == -1) return a;
    }
    return static_cast<C>(a / b);
  }
};
struct RemOp {
  template <typename C>
  static C F(C a, C b) { return std::fmod(a, b); }
  // x % 0 is x; the signed x % -1 is 0.
  template <typename C>
  static C I(C a, C b) {
    if (b == 0) return a;
    if constexpr (std::is_signed_v<C>) {
      if (b == -1) return 0;
    }
    return static_cast<C>(a % b);
  }
};
struct MaxOp {
  template <typename C>
  static C F(C a, C b) { return MaxOf(a, b); }
  template <typename C>
  static C I(C a, C b) { return MaxOf(a, b); }
  static bool P(bool a, bool b) { return a || b; }
};
struct MinOp {
  template <typename C>
  static C F(C a, C b) { return MinOf(a, b); }
  template <typename C>
  static C I(C a, C b) { return MinOf(a, b); }
  static bool P(bool a, bool b) { return a && b; }
};

// Unary operations: F on floats, I on integers where the op allows integers.
struct NegOp {
  template <typename C>
  static C F(C x) { return -x; }
  template <typename C>
  static C I(C x) { return WrapSub(C{0}, x); }
};
struct AbsOp {
  template <typename C>
  static C F(C x) { return std::fabs(x); }
  template <typename C>
  static C I(C x) {
    if constexpr (std::is_signed_v<C>) {
      return x < 0 ? NegOp::I(x) : x;
    } else {
      return x;
    }
  }
};
struct ExpOp {
  template <typename C>
  static C F(C x) { return std::exp(x); }
};
struct LogOp {
  template <typename C>
  static C F(C x) { return std::log(x); }
};
struct TanhOp {
  template <typename C>
  static C F(C x) { return std::tanh(x); }
};
struct SqrtOp {
  template <typename C>
  static C F(C x) { return std::sqrt(x); }
};
struct RsqrtOp {
  template <typename C>
  static C F(C x) { return C{1} / std::sqrt(x); }
};
// XLA's 1 / (1 + exp(-x)) in the compute type: within 2 ulps, and 0 once exp(-x) overflows.
struct LogisticOp {
  template <typename C>
  static C F(C x) { return C{1} / (C{1} + std::exp(-x)); }
};

template <typename T, typename Cmp>
void CompareLoop(const Tensor& a, const Tensor& b, Tensor& out, Cmp cmp) {
  const T* x = a.data_as<T>();
  const T* y = b.data_as<T>();
  bool* o = out.data_as<bool>();
  int64_t n = out.num_elements();
  for (int64_t i = 0; i < n; ++i) o[i] = cmp(Load(x[i]), Load(y[i]));
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
    case 4:
      return f(uint32_t{});
    default:
      return f(uint64_t{});
  }
}

Results Select(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const Tensor& pred = in[0];
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  if (out.byte_size() == 0) return std::vector<Tensor>{out};
  if (pred.dims().empty()) {
    const Tensor& chosen = pred.data_as<bool>()[0] ? in[1] : in[2];
    std::memcpy(out.data(), chosen.data(), out.byte_size());
    return std::vector<Tensor>{out};
  }
  DispatchBytes(ir::DTypeSize(out.dtype()), [&](auto tag) {
    using U = decltype(tag);
    const bool* p = pred.data_as<bool>();
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

// Float to integer as XLA:CPU converts (a saturating fptosi/fptoui): truncation toward zero, NaN to
// 0, values past either end of I's range to that end.
template <typename I>
I FloatToInt(double x) {
  if (std::isnan(x)) return 0;
  // I's range is [lo, hi) with lo 0 or -2^digits and hi 2^digits, both exact doubles.
  const double lo = static_cast<double>(std::numeric_limits<I>::min());
  const double hi = std::ldexp(1.0, std::numeric_limits<I>::digits);
  if (x <= lo) return std::numeric_limits<I>::min();
  if (x >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(x);
}

// One element of convert_element_type with XLA:CPU's semantics: to pred x != 0 (NaN is true);
// floats to integers by FloatToInt; integers to narrower integers wrap (two's complement), from
// pred 0 or 1; to f16 and f32 one rounding to nearest even; to bf16 through f32, as XLA:CPU.
template <typename To, typename From>
To ConvertOne(From x) {
  const auto v = Load(x);  // float, double, an integer or bool
  if constexpr (std::is_same_v<To, bool>) {
    return v != 0;
  } else if constexpr (kIsInt<To>) {
    if constexpr (std::is_floating_point_v<decltype(v)>) {
      return FloatToInt<To>(v);
    } else {
      return static_cast<To>(v);
    }
  } else if constexpr (std::is_same_v<To, bf16>) {
    return bf16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, ir::f16>) {
    return ir::f16(static_cast<double>(v));
  } else {
    return static_cast<To>(v);
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
