// Reference kernels of the math and bit primitives (ir/prims/math.cc), with XLA CPU's semantics.
// Float functions are evaluated in f64 and rounded once to the result type, so these kernels are
// the accuracy oracle of the x86 ones; s32 arithmetic wraps; shifts by an amount outside
// [0, 32) give 0 (or the sign for the arithmetic right shift), as XLA defines them.
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
using elementwise::Wrap;
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

template <double (*fn)(double)>
struct F64Unary {
  static float F(float x) { return static_cast<float>(fn(x)); }
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
  static float F(float x) {
    if (std::isnan(x) || x == 0) return x;  // NaN, +0 and -0 are their own sign
    return x > 0 ? 1.0f : -1.0f;
  }
  static int32_t I(int32_t x) { return (x > 0) - (x < 0); }
};

struct PowOp {
  static float F(float x, float y) { return static_cast<float>(std::pow(double{x}, double{y})); }
};
struct Atan2Op {
  static float F(float y, float x) { return static_cast<float>(std::atan2(double{y}, double{x})); }
};

struct AndOp {
  static int32_t I(int32_t a, int32_t b) { return a & b; }
  static uint8_t P(uint8_t a, uint8_t b) { return a & b; }
};
struct OrOp {
  static int32_t I(int32_t a, int32_t b) { return a | b; }
  static uint8_t P(uint8_t a, uint8_t b) { return a | b; }
};
struct XorOp {
  static int32_t I(int32_t a, int32_t b) { return a ^ b; }
  static uint8_t P(uint8_t a, uint8_t b) { return a ^ b; }
};
struct NotOp {
  static int32_t I(int32_t x) { return ~x; }
  static uint8_t P(uint8_t x) { return x ? 0 : 1; }
};
struct ShiftLeftOp {
  static int32_t I(int32_t x, int32_t n) {
    return static_cast<uint32_t>(n) < 32 ? Wrap(static_cast<uint32_t>(x) << n) : 0;
  }
};
struct ShiftRightLogicalOp {
  static int32_t I(int32_t x, int32_t n) {
    return static_cast<uint32_t>(n) < 32 ? Wrap(static_cast<uint32_t>(x) >> n) : 0;
  }
};
struct ShiftRightArithmeticOp {
  static int32_t I(int32_t x, int32_t n) { return x >> (static_cast<uint32_t>(n) < 32 ? n : 31); }
};
struct PopulationCountOp {
  static int32_t I(int32_t x) { return std::popcount(static_cast<uint32_t>(x)); }
};

Results IsFinite(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  uint8_t* o = out.data_as<uint8_t>();
  const int64_t n = out.num_elements();
  Dispatch(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = in[0].data_as<T>();
    for (int64_t i = 0; i < n; ++i) o[i] = std::isfinite(static_cast<float>(Load(x[i]))) ? 1 : 0;
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
    if constexpr (!std::is_same_v<T, uint8_t>) {
      using C = Compute<T>;
      auto mul = [](C a, C b) -> C {
        if constexpr (std::is_same_v<C, int32_t>) {
          return Wrap(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
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
        if constexpr (std::is_same_v<C, float>) {
          if (y < 0) acc = 1.0f / acc;
        }
        dst[i] = elementwise::Store<T>(acc);
      }
    }
  });
  return std::vector<Tensor>{out};
}

// The next value of x's type after x towards y: std::nextafter for f32; for bf16 a step of one
// in the 16-bit pattern (its own ulp), from zero to the smallest subnormal of y's sign.
ir::bf16 NextafterBf16(ir::bf16 x, ir::bf16 y) {
  const float fx = static_cast<float>(x), fy = static_cast<float>(y);
  if (std::isnan(fx) || std::isnan(fy)) return ir::bf16(std::numeric_limits<float>::quiet_NaN());
  if (fx == fy) return y;
  ir::bf16 out;
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
  if (in[0].dtype() == ir::DType::kBF16) {
    const ir::bf16* x = in[0].data_as<ir::bf16>();
    const ir::bf16* y = in[1].data_as<ir::bf16>();
    ir::bf16* o = out.data_as<ir::bf16>();
    for (int64_t i = 0; i < n; ++i) o[i] = NextafterBf16(x[i], y[i]);
  } else {
    const float* x = in[0].data_as<float>();
    const float* y = in[1].data_as<float>();
    float* o = out.data_as<float>();
    for (int64_t i = 0; i < n; ++i) o[i] = std::nextafter(x[i], y[i]);
  }
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
