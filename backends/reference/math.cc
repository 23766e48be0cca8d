// Reference kernels of the math and bit primitives (ir/prims/math.cc), with XLA CPU's semantics.
// Float functions are evaluated in f64 and rounded once to the result type, so these kernels are
// the accuracy oracle of the x86 ones (f64 itself is evaluated by the C library); integer
// arithmetic wraps; shifts by an amount outside [0, bits) give 0 (or the sign for the arithmetic
// right shift), as XLA defines them.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/reference/dtype_dispatch.h"
#include "backends/reference/elementwise_loops.h"
#include "backends/reference/kernel.h"
#include "base/status_macros.h"
#include "ir/tensor.h"

namespace shardjit::backends::reference {
namespace {

using elementwise::Binary;
using elementwise::Load;
using elementwise::Results;
using elementwise::Unary;
using ir::Tensor;

// erf^-1(y) in f64: a rational first guess refined by Newton steps on erf (quadratic
// convergence; three steps reach f64 precision from the guess's 1e-3 relative error).
double ErfInv(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return std::numeric_limits<double>::quiet_NaN();
  if (y == 1) return std::numeric_limits<double>::infinity();
  if (y == -1) return -std::numeric_limits<double>::infinity();
  if (y == 0) return y;  // keeps -0
  // Giles' single-precision approximation (w = -log(1 - y^2)) as the starting point.
  const double w = -std::log((1.0 - y) * (1.0 + y));
  double x;
  if (w < 5.0) {
    const double t = w - 2.5;
    double p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                     -0.00125372503, -0.00417768164, 0.246640727, 1.50140941}) {
      p = p * t + c;
    }
    x = p * y;
  } else {
    const double t = std::sqrt(w) - 3.0;
    double p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                     -0.0076224613, 0.00943887047, 1.00167406, 2.83297682}) {
      p = p * t + c;
    }
    x = p * y;
  }
  const double two_over_sqrt_pi = 1.1283791670955126;
  for (int i = 0; i < 3; ++i) {
    const double slope = two_over_sqrt_pi * std::exp(-x * x);
    if (slope == 0) break;
    x -= (std::erf(x) - y) / slope;
  }
  return x;
}

// A function evaluated in f64 and rounded once to the operand's type.
template <double (*fn)(double)>
struct F64Unary {
  template <typename C>
  static C F(C x) { return static_cast<C>(fn(x)); }
};

double Sin(double x) { return std::sin(x); }
double Cos(double x) { return std::cos(x); }
double Tan(double x) { return std::tan(x); }
double Erf(double x) { return std::erf(x); }
double Log1p(double x) { return std::log1p(x); }
double Expm1(double x) { return std::expm1(x); }
double Floor(double x) { return std::floor(x); }
double Ceil(double x) { return std::ceil(x); }
double AwayFromZero(double x) { return std::round(x); }
double NearestEven(double x) { return std::nearbyint(x); }

struct SignOp {
  template <typename C>
  static C F(C x) {
    if (std::isnan(x) || x == 0) return x;  // NaN, +0 and -0 are their own sign
    return x > 0 ? C{1} : C{-1};
  }
  template <typename C>
  static C I(C x) { return static_cast<C>((x > 0) - (x < 0)); }
};

struct PowOp {
  template <typename C>
  static C F(C x, C y) { return static_cast<C>(std::pow(double{x}, double{y})); }
};
struct Atan2Op {
  template <typename C>
  static C F(C y, C x) { return static_cast<C>(std::atan2(double{y}, double{x})); }
};

struct AndOp {
  template <typename C>
  static C I(C a, C b) { return a & b; }
  static bool P(bool a, bool b) { return a && b; }
};
struct OrOp {
  template <typename C>
  static C I(C a, C b) { return a | b; }
  static bool P(bool a, bool b) { return a || b; }
};
struct XorOp {
  template <typename C>
  static C I(C a, C b) { return a ^ b; }
  static bool P(bool a, bool b) { return a != b; }
};
struct NotOp {
  template <typename C>
  static C I(C x) { return static_cast<C>(~x); }
  static bool P(bool x) { return !x; }
};

// Shifts by an amount outside [0, bits) give 0, or the sign for the arithmetic right shift;
// the amount is the second operand, of the same type.
template <typename C>
constexpr uint64_t kBits = sizeof(C) * 8;

struct ShiftLeftOp {
  template <typename C>
  static C I(C x, C n) {
    using U = WrapType<C>;
    return static_cast<uint64_t>(n) < kBits<C> ? static_cast<C>(static_cast<U>(x) << n) : C{0};
  }
};
struct ShiftRightLogicalOp {
  template <typename C>
  static C I(C x, C n) {
    using U = std::make_unsigned_t<C>;
    return static_cast<uint64_t>(n) < kBits<C> ? static_cast<C>(static_cast<U>(x) >> n) : C{0};
  }
};
// On unsigned types too, the shifted-in bits are copies of the top bit (XLA reads the bits as
// signed).
struct ShiftRightArithmeticOp {
  template <typename C>
  static C I(C x, C n) {
    using S = std::make_signed_t<C>;
    const uint64_t amount = static_cast<uint64_t>(n) < kBits<C> ? static_cast<uint64_t>(n)
                                                                 : kBits<C> - 1;
    return static_cast<C>(static_cast<S>(x) >> amount);
  }
};
struct PopulationCountOp {
  template <typename C>
  static C I(C x) { return static_cast<C>(std::popcount(static_cast<std::make_unsigned_t<C>>(x))); }
};

Results IsFinite(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  bool* o = out.data_as<bool>();
  const int64_t n = out.num_elements();
  Dispatch(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = in[0].data_as<T>();
    for (int64_t i = 0; i < n; ++i) o[i] = std::isfinite(static_cast<double>(Load(x[i])));
  });
  return std::vector<Tensor>{out};
}

Results Round(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  if (op.round().rounding_method() == ir::TO_NEAREST_EVEN) {
    return Unary<F64Unary<NearestEven>>(op, in, allocator);
  }
  return Unary<F64Unary<AwayFromZero>>(op, in, allocator);
}

// x ** y by binary exponentiation with every product rounded to the operand type (JAX expands
// integer_pow into these multiplies, so bf16 rounds each one); y < 0 is 1 / x ** -y.
Results IntegerPow(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const int64_t y = op.integer_pow().y();
  const uint64_t magnitude = y < 0 ? -static_cast<uint64_t>(y) : static_cast<uint64_t>(y);
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  const int64_t n = out.num_elements();
  Dispatch(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      using C = Compute<T>;
      auto mul = [](C a, C b) -> C {
        if constexpr (kIsInt<C>) {
          return elementwise::WrapMul(a, b);
        } else {
          return Load(elementwise::Store<T>(a * b));  // rounded to T
        }
      };
      const T* src = in[0].data_as<T>();
      T* dst = out.data_as<T>();
      for (int64_t i = 0; i < n; ++i) {
        C x = Load(src[i]);
        C acc = 1;
        for (uint64_t m = magnitude; m > 0; m >>= 1) {
          if (m & 1) acc = mul(acc, x);
          if (m > 1) x = mul(x, x);
        }
        if constexpr (std::is_floating_point_v<C>) {
          if (y < 0) acc = C{1} / acc;
        }
        dst[i] = elementwise::Store<T>(acc);
      }
    }
  });
  return std::vector<Tensor>{out};
}

// The next value of x's type after x towards y: std::nextafter for f32 and f64; for the 16-bit
// floats a step of one in the bit pattern (their own ulp), from zero to the smallest subnormal of
// y's sign.
template <typename T>
T Nextafter16(T x, T y) {
  const float fx = static_cast<float>(x), fy = static_cast<float>(y);
  if (std::isnan(fx) || std::isnan(fy)) return T(std::numeric_limits<float>::quiet_NaN());
  if (fx == fy) return y;
  T out;
  if (fx == 0) {
    out.bits = static_cast<uint16_t>((y.bits & 0x8000u) | 1u);
  } else {
    const bool away_from_zero = (fy > fx) == (fx > 0);
    out.bits = static_cast<uint16_t>(away_from_zero ? x.bits + 1 : x.bits - 1);
  }
  return out;
}

Results Nextafter(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  const int64_t n = out.num_elements();
  Dispatch(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloat<T>) {
      const T* x = in[0].data_as<T>();
      const T* y = in[1].data_as<T>();
      T* o = out.data_as<T>();
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_floating_point_v<T>) {
          o[i] = std::nextafter(x[i], y[i]);
        } else {
          o[i] = Nextafter16(x[i], y[i]);
        }
      }
    }
  });
  return std::vector<Tensor>{out};
}

const bool registered = [] {
  RegisterKernel("sin", Unary<F64Unary<Sin>>);
  RegisterKernel("cos", Unary<F64Unary<Cos>>);
  RegisterKernel("tan", Unary<F64Unary<Tan>>);
  RegisterKernel("erf", Unary<F64Unary<Erf>>);
  RegisterKernel("erf_inv", Unary<F64Unary<ErfInv>>);
  RegisterKernel("log1p", Unary<F64Unary<Log1p>>);
  RegisterKernel("expm1", Unary<F64Unary<Expm1>>);
  RegisterKernel("floor", Unary<F64Unary<Floor>>);
  RegisterKernel("ceil", Unary<F64Unary<Ceil>>);
  RegisterKernel("round", Round);
  RegisterKernel("sign", Unary<SignOp>);
  RegisterKernel("is_finite", IsFinite);
  RegisterKernel("integer_pow", IntegerPow);
  RegisterKernel("pow", Binary<PowOp>);
  RegisterKernel("atan2", Binary<Atan2Op>);
  RegisterKernel("nextafter", Nextafter);
  RegisterKernel("and", Binary<AndOp>);
  RegisterKernel("or", Binary<OrOp>);
  RegisterKernel("xor", Binary<XorOp>);
  RegisterKernel("not", Unary<NotOp>);
  RegisterKernel("shift_left", Binary<ShiftLeftOp>);
  RegisterKernel("shift_right_logical", Binary<ShiftRightLogicalOp>);
  RegisterKernel("shift_right_arithmetic", Binary<ShiftRightArithmeticOp>);
  RegisterKernel("population_count", Unary<PopulationCountOp>);
  return true;
}();

}  // namespace
}  // namespace shardjit::backends::reference
