// Every dtype through the elementwise primitives, convert_element_type, the reductions, the dot
// and sorting, against oracles computed here in wider arithmetic (__int128 for integers, long
// double for floats) on typed storage (no round trip through double).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/reference/kernel_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/dtype.h"
#include "ir/dtype_dispatch.h"

namespace shardjit::backends::reference {
namespace {

using ir::bf16;
using ir::DType;
using ir::f16;
using ir::Tensor;
using test_util::Eval;
using test_util::MakeOp;
using Int = __int128;

template <typename T>
constexpr bool kInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <typename T>
constexpr bool kHalf = std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

template <typename T>
Tensor MakeTensor(const std::vector<T>& v) {
  Tensor t = Tensor::Empty({ir::kDTypeOf<T>, {static_cast<int64_t>(v.size())}});
  for (size_t i = 0; i < v.size(); ++i) t.data_as<T>()[i] = v[i];
  return t;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  EXPECT_EQ(t.dtype(), ir::kDTypeOf<T>);
  std::vector<T> v(t.num_elements());
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.data_as<T>()[i];
  return v;
}

// A value of T as long double (exact for every dtype but the 64-bit integers past 2^64).
template <typename T>
long double Wide(T x) {
  if constexpr (kHalf<T>) {
    return static_cast<float>(x);
  } else {
    return static_cast<long double>(x);
  }
}

// Storage value of a floating T nearest to v, rounding as the kernels define it: the 16-bit
// floats through f32.
template <typename T>
T RoundFloat(long double v) {
  if constexpr (kHalf<T>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// The bit pattern of a float value as an integer whose order is the values' order, for ulp
// distances.
template <typename T>
int64_t OrderedBits(T x) {
  uint64_t bits;
  int width;
  if constexpr (kHalf<T>) {
    bits = x.bits;
    width = 16;
  } else if constexpr (std::is_same_v<T, float>) {
    bits = std::bit_cast<uint32_t>(x);
    width = 32;
  } else {
    bits = std::bit_cast<uint64_t>(x);
    width = 64;
  }
  const uint64_t sign = uint64_t{1} << (width - 1);
  const uint64_t magnitude = bits & (sign - 1);
  return (bits & sign) ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
}

template <typename T>
bool IsNaN(T x) {
  return std::isnan(Wide(x));
}

// Expects got within `ulps` of want (NaN matches NaN).
template <typename T>
void ExpectNear(T got, T want, int64_t ulps, const std::string& what) {
  if (IsNaN(want)) {
    EXPECT_TRUE(IsNaN(got)) << what << ": got " << static_cast<double>(Wide(got));
    return;
  }
  const int64_t distance = std::abs(OrderedBits(got) - OrderedBits(want));
  EXPECT_LE(distance, ulps) << what << ": got " << static_cast<double>(Wide(got)) << " want "
                            << static_cast<double>(Wide(want));
}

// Operands: the type's edge values paired with each other, then random values (integers over
// their whole range, floats from random bit patterns for the 16-bit types and random
// magnitudes for f32/f64).
template <typename T>
std::vector<T> Edges() {
  if constexpr (kInt<T>) {
    using L = std::numeric_limits<T>;
    return {T(0), T(1), T(2), T(3), static_cast<T>(-1), static_cast<T>(-7), L::min(), L::max(),
            static_cast<T>(L::max() - 1), static_cast<T>(L::min() + 1), T(sizeof(T) * 8 - 1),
            T(sizeof(T) * 8)};
  } else {
    std::vector<T> out;
    for (long double v : {0.0L, -0.0L, 1.0L, -1.0L, 0.5L, 2.5L, -3.75L, 1e-3L, 100.0L, 65504.0L,
                          static_cast<long double>(INFINITY), -static_cast<long double>(INFINITY),
                          static_cast<long double>(NAN)}) {
      out.push_back(RoundFloat<T>(v));
    }
    return out;
  }
}

template <typename T>
std::pair<std::vector<T>, std::vector<T>> Operands(uint32_t seed) {
  std::vector<T> a, b;
  const std::vector<T> edges = Edges<T>();
  for (T x : edges) {
    for (T y : edges) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 300; ++i) {
    for (std::vector<T>* v : {&a, &b}) {
      if constexpr (kInt<T>) {
        v->push_back(static_cast<T>(rng()));
      } else if constexpr (kHalf<T>) {
        T x;
        x.bits = static_cast<uint16_t>(rng());
        v->push_back(x);
      } else {
        std::uniform_real_distribution<double> mag(-30, 30);
        const double x = std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng),
                                    static_cast<int>(mag(rng)));
        v->push_back(static_cast<T>(x));
      }
    }
  }
  return {a, b};
}

template <typename T>
Tensor Binary(const std::string& opcode, const std::vector<T>& a, const std::vector<T>& b) {
  return Eval(MakeOp(opcode), {MakeTensor(a), MakeTensor(b)});
}

// ---------------------------------------------------------------------------------------------
// Integers: wrapping arithmetic, XLA's division results, shifts, bit ops, comparisons.

// v modulo 2^bits, as T (two's complement).
template <typename T>
T WrapTo(Int v) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<unsigned __int128>(v)));
}

template <typename T>
T IntOracle(const std::string& op, T x, T y) {
  constexpr int kBits = sizeof(T) * 8;
  const Int a = x, b = y;
  using U = std::make_unsigned_t<T>;
  using S = std::make_signed_t<T>;
  if (op == "add") return WrapTo<T>(a + b);
  if (op == "sub") return WrapTo<T>(a - b);
  if (op == "mul") {
    return WrapTo<T>(static_cast<Int>(static_cast<unsigned __int128>(a) *
                                      static_cast<unsigned __int128>(b)));
  }
  if (op == "div") return b == 0 ? static_cast<T>(~U{0}) : WrapTo<T>(a / b);
  if (op == "rem") return b == 0 ? x : WrapTo<T>(a % b);
  if (op == "max") return std::max(x, y);
  if (op == "min") return std::min(x, y);
  if (op == "and") return static_cast<T>(static_cast<U>(x) & static_cast<U>(y));
  if (op == "or") return static_cast<T>(static_cast<U>(x) | static_cast<U>(y));
  if (op == "xor") return static_cast<T>(static_cast<U>(x) ^ static_cast<U>(y));
  const bool in_range = b >= 0 && b < kBits;
  // The bits of x as a signed value, for the arithmetic shift.
  const Int as_signed = static_cast<S>(static_cast<U>(x));
  if (op == "shift_left") return in_range ? WrapTo<T>(a << static_cast<int>(b)) : T(0);
  if (op == "shift_right_logical") {
    return in_range ? static_cast<T>(static_cast<U>(x) >> static_cast<int>(b)) : T(0);
  }
  if (op == "shift_right_arithmetic") {
    return WrapTo<T>(as_signed >> (in_range ? static_cast<int>(b) : kBits - 1));
  }
  ADD_FAILURE() << "no oracle for " << op;
  return T(0);
}

// select(a < b, a, b) and clamp(1, a, 5) against the elements they pick (NaNs left out of the
// clamp: XLA's clamp of NaN is its max(min(...)) order's business).
template <typename T>
void ExpectPicks(const std::vector<T>& a, const std::vector<T>& b) {
  ir::Op lt = MakeOp("compare");
  lt.mutable_compare()->set_direction(ir::LT);
  const Tensor less = Eval(lt, {MakeTensor(a), MakeTensor(b)});
  const std::vector<T> picked = Values<T>(Eval(MakeOp("select"), {less, MakeTensor(a),
                                                                  MakeTensor(b)}));
  auto of = [](int v) {
    if constexpr (kInt<T>) {
      return static_cast<T>(v);
    } else {
      return RoundFloat<T>(v);
    }
  };
  const std::vector<T> lo(a.size(), of(1)), hi(a.size(), of(5));
  const std::vector<T> clamped =
      Values<T>(Eval(MakeOp("clamp"), {MakeTensor(lo), MakeTensor(a), MakeTensor(hi)}));
  for (size_t i = 0; i < a.size(); ++i) {
    const T want = less.data_as<uint8_t>()[i] ? a[i] : b[i];
    EXPECT_TRUE(std::memcmp(&picked[i], &want, sizeof(T)) == 0) << "select " << i;
    if (IsNaN(a[i])) continue;
    const T c = Wide(a[i]) < Wide(lo[i]) ? lo[i] : Wide(a[i]) > Wide(hi[i]) ? hi[i] : a[i];
    EXPECT_EQ(Wide(clamped[i]), Wide(c)) << "clamp " << static_cast<double>(Wide(a[i]));
  }
}

template <typename T>
void CheckIntegerOps() {
  SCOPED_TRACE(std::string(ir::DTypeName(ir::kDTypeOf<T>)));
  const auto [a, b] = Operands<T>(7);
  for (const char* op : {"add", "sub", "mul", "div", "rem", "max", "min", "and", "or", "xor",
                         "shift_left", "shift_right_logical", "shift_right_arithmetic"}) {
    const std::vector<T> got = Values<T>(Binary(op, a, b));
    ASSERT_EQ(got.size(), a.size()) << op;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(+got[i], +IntOracle<T>(op, a[i], b[i]))
          << op << "(" << +a[i] << ", " << +b[i] << ")";
    }
  }
  using U = std::make_unsigned_t<T>;
  const Tensor x = MakeTensor(a);
  const std::vector<T> neg = Values<T>(Eval(MakeOp("neg"), {x}));
  const std::vector<T> abs = Values<T>(Eval(MakeOp("abs"), {x}));
  const std::vector<T> bit_not = Values<T>(Eval(MakeOp("not"), {x}));
  const std::vector<T> popcount = Values<T>(Eval(MakeOp("population_count"), {x}));
  const std::vector<T> sign = Values<T>(Eval(MakeOp("sign"), {x}));
  for (size_t i = 0; i < a.size(); ++i) {
    const Int v = a[i];
    EXPECT_EQ(+neg[i], +WrapTo<T>(-v)) << +a[i];
    EXPECT_EQ(+abs[i], +WrapTo<T>(v < 0 ? -v : v)) << +a[i];
    EXPECT_EQ(+bit_not[i], +static_cast<T>(~static_cast<U>(a[i]))) << +a[i];
    EXPECT_EQ(+popcount[i], std::popcount(static_cast<U>(a[i]))) << +a[i];
    EXPECT_EQ(+sign[i], v > 0 ? 1 : v < 0 ? -1 : 0) << +a[i];
  }
  ir::Op cube = MakeOp("integer_pow");
  cube.mutable_integer_pow()->set_y(3);
  const std::vector<T> cubes = Values<T>(Eval(cube, {x}));
  for (size_t i = 0; i < a.size(); ++i) {
    const uint64_t u = static_cast<U>(a[i]);  // 64-bit: no promotion to int to overflow
    EXPECT_EQ(+cubes[i], +static_cast<T>(static_cast<U>(u * u * u))) << +a[i];
  }
  ExpectPicks(a, b);
  for (const auto& [direction, holds] :
       std::vector<std::pair<ir::ComparisonDirection, bool (*)(Int, Int)>>{
           {ir::LT, [](Int p, Int q) { return p < q; }},
           {ir::LE, [](Int p, Int q) { return p <= q; }},
           {ir::GT, [](Int p, Int q) { return p > q; }},
           {ir::GE, [](Int p, Int q) { return p >= q; }},
           {ir::EQ, [](Int p, Int q) { return p == q; }},
           {ir::NE, [](Int p, Int q) { return p != q; }}}) {
    ir::Op op = MakeOp("compare");
    op.mutable_compare()->set_direction(direction);
    const std::vector<bool> want = [&] {
      std::vector<bool> w;
      for (size_t i = 0; i < a.size(); ++i) w.push_back(holds(a[i], b[i]));
      return w;
    }();
    const Tensor got = Eval(op, {MakeTensor(a), MakeTensor(b)});
    ASSERT_EQ(got.dtype(), DType::kPred);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(got.data_as<uint8_t>()[i], want[i] ? 1 : 0) << +a[i] << " vs " << +b[i];
    }
  }
}

TEST(DTypes, IntegerElementwiseOpsWrapAndFollowXla) {
  CheckIntegerOps<int8_t>();
  CheckIntegerOps<uint8_t>();
  CheckIntegerOps<int16_t>();
  CheckIntegerOps<uint16_t>();
  CheckIntegerOps<int32_t>();
  CheckIntegerOps<uint32_t>();
  CheckIntegerOps<int64_t>();
  CheckIntegerOps<uint64_t>();
}

// Hand-derived values of the edge cases.
TEST(DTypes, IntegerEdgeCasesByHand) {
  EXPECT_EQ(Values<int8_t>(Binary<int8_t>("add", {127}, {1}))[0], -128);
  EXPECT_EQ(Values<uint8_t>(Binary<uint8_t>("sub", {0}, {1}))[0], 255);
  EXPECT_EQ(Values<uint16_t>(Binary<uint16_t>("mul", {65535}, {65535}))[0], 1);
  EXPECT_EQ(Values<int16_t>(Binary<int16_t>("div", {-32768}, {-1}))[0], -32768);
  EXPECT_EQ(Values<uint32_t>(Binary<uint32_t>("div", {7}, {0}))[0], 0xffffffffu);
  EXPECT_EQ(Values<int64_t>(Binary<int64_t>("rem", {-7}, {0}))[0], -7);
  EXPECT_EQ(Values<int64_t>(Binary<int64_t>("rem", {-7}, {3}))[0], -1);
  EXPECT_EQ(Values<uint8_t>(Binary<uint8_t>("shift_right_arithmetic", {0x80}, {7}))[0], 0xff);
  EXPECT_EQ(Values<uint8_t>(Binary<uint8_t>("shift_left", {1}, {8}))[0], 0);
  EXPECT_EQ(Values<int64_t>(Binary<int64_t>("shift_right_arithmetic", {-8}, {64}))[0], -1);
  EXPECT_EQ(Values<uint64_t>(Binary<uint64_t>("add", {~uint64_t{0}}, {2}))[0], 1u);
}

// ---------------------------------------------------------------------------------------------
// Floats: arithmetic correctly rounded (the 16-bit types computed in f32 and rounded once),
// transcendental functions within 1 ulp of a long double evaluation.

template <typename T>
void CheckFloatOps() {
  SCOPED_TRACE(std::string(ir::DTypeName(ir::kDTypeOf<T>)));
  const auto [a, b] = Operands<T>(11);
  // f32 evaluates the 16-bit types; long double rounded to T is within half an ulp of exact.
  auto through = [](long double v) {
    if constexpr (kHalf<T>) return RoundFloat<T>(static_cast<float>(v));
    return RoundFloat<T>(v);
  };
  struct BinaryCase {
    const char* op;
    long double (*fn)(long double, long double);
    int64_t ulps;
  };
  const std::vector<BinaryCase> binaries = {
      {"add", [](long double x, long double y) { return x + y; }, 0},
      {"sub", [](long double x, long double y) { return x - y; }, 0},
      {"mul", [](long double x, long double y) { return x * y; }, 0},
      {"div", [](long double x, long double y) { return x / y; }, 0},
      {"pow", [](long double x, long double y) { return std::pow(x, y); }, 1},
      {"atan2", [](long double x, long double y) { return std::atan2(x, y); }, 1},
      {"rem", [](long double x, long double y) { return std::fmod(x, y); }, 0},
  };
  for (const BinaryCase& c : binaries) {
    const std::vector<T> got = Values<T>(Binary(c.op, a, b));
    for (size_t i = 0; i < a.size(); ++i) {
      // f64 arithmetic against an 80-bit evaluation may differ by a double rounding.
      const int64_t ulps = std::is_same_v<T, double> ? std::max<int64_t>(c.ulps, 1) : c.ulps;
      ExpectNear(got[i], through(c.fn(Wide(a[i]), Wide(b[i]))), ulps,
                 std::string(c.op) + "(" + std::to_string(static_cast<double>(Wide(a[i]))) +
                     ", " + std::to_string(static_cast<double>(Wide(b[i]))) + ")");
    }
  }
  struct UnaryCase {
    const char* op;
    long double (*fn)(long double);
    int64_t ulps;
  };
  const std::vector<UnaryCase> unaries = {
      {"neg", [](long double x) { return -x; }, 0},
      {"abs", [](long double x) { return std::fabs(x); }, 0},
      {"sqrt", [](long double x) { return std::sqrt(x); }, 0},
      {"floor", [](long double x) { return std::floor(x); }, 0},
      {"ceil", [](long double x) { return std::ceil(x); }, 0},
      {"exp", [](long double x) { return std::exp(x); }, 1},
      {"log", [](long double x) { return std::log(x); }, 1},
      {"tanh", [](long double x) { return std::tanh(x); }, 1},
      {"sin", [](long double x) { return std::sin(x); }, 1},
      {"cos", [](long double x) { return std::cos(x); }, 1},
      {"erf", [](long double x) { return std::erf(x); }, 1},
      {"log1p", [](long double x) { return std::log1p(x); }, 1},
      {"expm1", [](long double x) { return std::expm1(x); }, 1},
      {"rsqrt", [](long double x) { return 1 / std::sqrt(x); }, 1},
      {"tan", [](long double x) { return std::tan(x); }, 1},
  };
  const Tensor x = MakeTensor(a);
  for (const UnaryCase& c : unaries) {
    const std::vector<T> got = Values<T>(Eval(MakeOp(c.op), {x}));
    for (size_t i = 0; i < a.size(); ++i) {
      ExpectNear(got[i], through(c.fn(Wide(a[i]))), c.ulps,
                 std::string(c.op) + "(" + std::to_string(static_cast<double>(Wide(a[i]))) + ")");
    }
  }
  // logistic is XLA's 1 / (1 + exp(-x)) in the compute type: two roundings, and 0 once exp(-x)
  // overflows (x below about -88 in f32, -709 in f64).
  const std::vector<T> logistic = Values<T>(Eval(MakeOp("logistic"), {x}));
  const long double underflow = std::is_same_v<T, double> ? -710 : -89;
  for (size_t i = 0; i < a.size(); ++i) {
    const long double v = Wide(a[i]);
    if (v < underflow) {
      EXPECT_EQ(Wide(logistic[i]), 0) << static_cast<double>(v);
    } else {
      ExpectNear(logistic[i], through(1 / (1 + std::exp(-v))), 2,
                 "logistic(" + std::to_string(static_cast<double>(v)) + ")");
    }
  }
  // round (away from zero and to nearest even), sign (of ±0 too), erf_inv (against the root of
  // erf(y) = x that Newton's method polishes in long double).
  ir::Op away = MakeOp("round");
  away.mutable_round()->set_rounding_method(ir::AWAY_FROM_ZERO);
  ir::Op even = MakeOp("round");
  even.mutable_round()->set_rounding_method(ir::TO_NEAREST_EVEN);
  const std::vector<T> to_even = Values<T>(Eval(even, {x}));
  const std::vector<T> rounded = Values<T>(Eval(away, {x}));
  const std::vector<T> sign = Values<T>(Eval(MakeOp("sign"), {x}));
  const std::vector<T> inverse = Values<T>(Eval(MakeOp("erf_inv"), {x}));
  for (size_t i = 0; i < a.size(); ++i) {
    const long double v = Wide(a[i]);
    ExpectNear(to_even[i], RoundFloat<T>(std::nearbyint(v)), 0, "round even");
    ExpectNear(rounded[i], RoundFloat<T>(std::round(v)), 0, "round");
    const long double want_sign = std::isnan(v) ? v : v > 0 ? 1 : v < 0 ? -1 : v;
    ExpectNear(sign[i], RoundFloat<T>(want_sign), 0, "sign");
    EXPECT_EQ(std::signbit(Wide(sign[i])), std::signbit(want_sign)) << static_cast<double>(v);
    if (std::fabs(v) < 1) {
      ASSERT_TRUE(std::isfinite(Wide(inverse[i]))) << "erf_inv(" << static_cast<double>(v) << ")";
    }
    long double root = std::fabs(v) > 1 || std::isnan(v) ? NAN
                       : v == 1                          ? INFINITY
                       : v == -1                         ? -INFINITY
                                                         : Wide(inverse[i]);
    for (int step = 0; step < 3 && std::isfinite(root); ++step) {
      root -= (std::erf(root) - v) / (2 / std::sqrt(std::acos(-1.0L)) * std::exp(-root * root));
    }
    ExpectNear(inverse[i], through(root), 2,
               "erf_inv(" + std::to_string(static_cast<double>(v)) + ")");
  }
  // integer_pow is products in T, each rounded (as XLA's multiplies; x^-2 = 1 / (x x), whose
  // x x may overflow in a 16-bit type).
  for (int64_t y : {3, -2}) {
    ir::Op pow = MakeOp("integer_pow");
    pow.mutable_integer_pow()->set_y(y);
    const std::vector<T> got = Values<T>(Eval(pow, {x}));
    for (size_t i = 0; i < a.size(); ++i) {
      const long double v = Wide(a[i]);
      const long double square = Wide(through(v * v));
      const T want = y == 3 ? through(square * v) : through(1 / square);
      ExpectNear(got[i], want, 1,
                 "integer_pow(" + std::to_string(static_cast<double>(v)) + ", " +
                     std::to_string(y) + ")");
    }
  }
  // select and clamp pick elements unchanged.
  ExpectPicks(a, b);
  // max/min propagate NaN; compare is IEEE (NaN unordered); is_finite.
  const std::vector<T> min = Values<T>(Binary("min", a, b));
  for (size_t i = 0; i < a.size(); ++i) {
    const long double p = Wide(a[i]), q = Wide(b[i]);
    ExpectNear(min[i], RoundFloat<T>(std::isnan(p) || std::isnan(q) ? NAN : std::min(p, q)), 0,
               "min");
  }
  const std::vector<T> max = Values<T>(Binary("max", a, b));
  ir::Op lt = MakeOp("compare");
  lt.mutable_compare()->set_direction(ir::LT);
  const Tensor less = Eval(lt, {MakeTensor(a), MakeTensor(b)});
  const Tensor finite = Eval(MakeOp("is_finite"), {x});
  for (size_t i = 0; i < a.size(); ++i) {
    const long double p = Wide(a[i]), q = Wide(b[i]);
    const long double want = std::isnan(p) || std::isnan(q) ? NAN : std::max(p, q);
    ExpectNear(max[i], RoundFloat<T>(want), 0, "max");
    EXPECT_EQ(less.data_as<uint8_t>()[i], p < q ? 1 : 0);
    EXPECT_EQ(finite.data_as<uint8_t>()[i], std::isfinite(p) ? 1 : 0);
  }
}

TEST(DTypes, FloatElementwiseOpsAreCorrectlyRounded) {
  CheckFloatOps<f16>();
  CheckFloatOps<bf16>();
  CheckFloatOps<float>();
  CheckFloatOps<double>();
}

TEST(DTypes, F16ArithmeticByHand) {
  // 2048 + 1 is not an f16 (11 significant bits): it rounds to even, 2048; 2048 + 3 to 2052.
  EXPECT_EQ(static_cast<float>(Values<f16>(Binary<f16>("add", {f16(2048.0f)}, {f16(1.0f)}))[0]),
            2048.0f);
  EXPECT_EQ(static_cast<float>(Values<f16>(Binary<f16>("add", {f16(2048.0f)}, {f16(3.0f)}))[0]),
            2052.0f);
  // 60000 * 2 overflows f16's 65504.
  EXPECT_EQ(static_cast<float>(Values<f16>(Binary<f16>("mul", {f16(60000.0f)}, {f16(2.0f)}))[0]),
            INFINITY);
  // nextafter steps one f16 ulp: 1 + 2^-10.
  EXPECT_EQ(static_cast<float>(Values<f16>(Binary<f16>("nextafter", {f16(1.0f)}, {f16(2.0f)}))[0]),
            1.0f + 0x1p-10f);
  EXPECT_EQ(Values<double>(Binary<double>("nextafter", {1.0}, {2.0}))[0], 1.0 + 0x1p-52);
}

// ---------------------------------------------------------------------------------------------
// convert_element_type between every pair of dtypes.

// What XLA:CPU gives for one element: see backends/reference/elementwise.cc's ConvertOne, here
// derived independently from the long double value.
template <typename To, typename From>
To ExpectedConvert(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    if constexpr (kInt<From> || std::is_same_v<From, bool>) return x != 0;
    return Wide(x) != 0 || std::isnan(Wide(x));
  } else if constexpr (kInt<To>) {
    if constexpr (kInt<From> || std::is_same_v<From, bool>) {
      return WrapTo<To>(static_cast<Int>(x));
    } else {
      const long double v = Wide(x);
      if (std::isnan(v)) return 0;
      if (v <= static_cast<long double>(std::numeric_limits<To>::min())) {
        return std::numeric_limits<To>::min();
      }
      if (v >= static_cast<long double>(std::numeric_limits<To>::max())) {
        return std::numeric_limits<To>::max();
      }
      return static_cast<To>(std::trunc(v));
    }
  } else if constexpr (std::is_same_v<To, bf16>) {
    return bf16(static_cast<float>(Wide(x)));  // through f32, as XLA:CPU
  } else if constexpr (std::is_same_v<To, f16>) {
    return f16(static_cast<double>(Wide(x)));
  } else {
    return static_cast<To>(Wide(x));
  }
}

template <typename T>
std::vector<T> ConvertInputs() {
  std::vector<T> v = Edges<T>();
  if constexpr (!kInt<T> && !std::is_same_v<T, bool>) {
    for (long double e : {300.7L, -129.5L, 255.5L, 65519.0L, 65520.0L, 4294967296.0L, -2.5e9L,
                          9.3e18L, 1.9e19L, -9.3e18L, 1e30L, -1e30L}) {
      v.push_back(RoundFloat<T>(e));
    }
  }
  return v;
}

template <typename From>
void CheckConvertsFrom() {
  const std::vector<From> in = [] {
    if constexpr (std::is_same_v<From, bool>) {
      return std::vector<From>{false, true};
    } else {
      return ConvertInputs<From>();
    }
  }();
  for (DType to : ir::kAllDTypes) {
    ir::Op op = MakeOp("convert_element_type");
    op.mutable_convert_element_type()->set_new_dtype(static_cast<ir::DTypeProto>(to));
    const Tensor got = Eval(op, {MakeTensor(in)});
    ir::VisitDType(to, [&](auto tag) {
      using To = decltype(tag);
      const std::vector<To> values = Values<To>(got);
      for (size_t i = 0; i < in.size(); ++i) {
        const To want = ExpectedConvert<To>(in[i]);
        const std::string what = std::string(ir::DTypeName(ir::kDTypeOf<From>)) + " " +
                                 std::to_string(static_cast<double>(Wide(in[i]))) + " -> " +
                                 std::string(ir::DTypeName(to));
        if constexpr (kInt<To> || std::is_same_v<To, bool>) {
          EXPECT_EQ(+values[i], +want) << what;
        } else {
          ExpectNear(values[i], want, 0, what);
        }
      }
    });
  }
}

TEST(DTypes, ConvertBetweenEveryPair) {
  for (DType from : ir::kAllDTypes) {
    SCOPED_TRACE(std::string(ir::DTypeName(from)));
    ir::VisitDType(from, [](auto tag) { CheckConvertsFrom<decltype(tag)>(); });
  }
}

template <typename To, typename From>
To Convert1(From x) {
  ir::Op op = MakeOp("convert_element_type");
  op.mutable_convert_element_type()->set_new_dtype(static_cast<ir::DTypeProto>(ir::kDTypeOf<To>));
  return Values<To>(Eval(op, {MakeTensor(std::vector<From>{x})}))[0];
}

TEST(DTypes, ConvertEdgeCasesByHand) {
  EXPECT_EQ(Convert1<uint8_t>(300.7f), 255);
  EXPECT_EQ(Convert1<uint8_t>(-5.0f), 0);
  EXPECT_EQ(Convert1<int8_t>(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(Convert1<int8_t>(int32_t{300}), 44);
  EXPECT_EQ(Convert1<int8_t>(int32_t{-129}), 127);
  EXPECT_EQ(Convert1<uint32_t>(int64_t{-1}), 0xffffffffu);
  EXPECT_EQ(Convert1<int64_t>(1e30), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Convert1<uint64_t>(-1.5), 0u);
  EXPECT_EQ(Convert1<float>(1e300), INFINITY);
  EXPECT_EQ(static_cast<float>(Convert1<f16>(65519.0f)), 65504.0f);
  EXPECT_EQ(static_cast<float>(Convert1<f16>(65520.0f)), INFINITY);
  EXPECT_EQ(static_cast<float>(Convert1<f16>(0x1p-25)), 0.0f);  // a tie below the subnormals
  EXPECT_EQ(static_cast<float>(Convert1<f16>(0x1.8p-25)), 0x1p-24f);
  EXPECT_EQ(Convert1<float>(~uint64_t{0}), 0x1p64f);
  EXPECT_EQ(Convert1<double>(int64_t{(1LL << 53) + 1}), 0x1p53);
  EXPECT_EQ(Convert1<bool>(std::numeric_limits<double>::quiet_NaN()), true);
  EXPECT_EQ(Convert1<uint16_t>(true), 1);
}

// ---------------------------------------------------------------------------------------------
// Reductions, the dot, sorting.

template <typename T>
void CheckReductions() {
  SCOPED_TRACE(std::string(ir::DTypeName(ir::kDTypeOf<T>)));
  std::vector<T> v = Operands<T>(3).first;
  if constexpr (!kInt<T>) {  // values whose sum has a finite oracle in every float type
    std::mt19937 rng(3);
    for (T& e : v) e = RoundFloat<T>(std::uniform_real_distribution<double>(-2, 2)(rng));
  }
  const Tensor x = MakeTensor(v);
  auto reduce = [&](const char* opcode) {
    ir::Op op = MakeOp(opcode);
    op.mutable_reduce()->add_axes(0);
    return Values<T>(Eval(op, {x}))[0];
  };
  if constexpr (kInt<T>) {
    Int sum = 0;
    unsigned __int128 prod = 1;
    for (T e : v) {
      sum += e;
      prod *= static_cast<unsigned __int128>(static_cast<Int>(e));
    }
    EXPECT_EQ(+reduce("reduce_sum"), +WrapTo<T>(sum));
    EXPECT_EQ(+reduce("reduce_prod"), +WrapTo<T>(static_cast<Int>(prod)));
    EXPECT_EQ(+reduce("reduce_max"), +*std::max_element(v.begin(), v.end()));
    EXPECT_EQ(+reduce("reduce_min"), +*std::min_element(v.begin(), v.end()));
  } else {
    long double sum = 0, magnitude = 0;
    for (T e : v) {
      sum += Wide(e);
      magnitude += std::fabs(Wide(e));
    }
    // Summed in the type's compute precision (f32 for the 16-bit floats), rounded once.
    const long double tol = std::is_same_v<T, double> ? 1e-13L * magnitude
                            : kHalf<T> ? 1e-5L * magnitude + std::fabs(sum) * 0x1p-7L
                                       : 1e-5L * magnitude;
    EXPECT_NEAR(static_cast<double>(Wide(reduce("reduce_sum"))), static_cast<double>(sum),
                static_cast<double>(tol));
    long double max = -INFINITY;
    for (T e : v) max = std::max(max, Wide(e));
    EXPECT_EQ(Wide(reduce("reduce_max")), max);
  }
}

TEST(DTypes, ReductionsOfEveryNumericDType) {
  CheckReductions<int8_t>();
  CheckReductions<uint8_t>();
  CheckReductions<int16_t>();
  CheckReductions<uint16_t>();
  CheckReductions<uint32_t>();
  CheckReductions<int64_t>();
  CheckReductions<uint64_t>();
  CheckReductions<f16>();
  CheckReductions<double>();
}

// [m, k] x [k, n] -> Out, against a triple loop in __int128 / long double.
template <typename In, typename Out>
void CheckDot(int64_t m, int64_t k, int64_t n) {
  SCOPED_TRACE(std::string(ir::DTypeName(ir::kDTypeOf<In>)) + " -> " +
               std::string(ir::DTypeName(ir::kDTypeOf<Out>)));
  std::mt19937_64 rng(m * 100 + k * 10 + n);
  auto random = [&](int64_t count) {
    std::vector<In> v(count);
    for (In& e : v) {
      if constexpr (kInt<In>) {
        e = static_cast<In>(rng());
      } else {
        e = RoundFloat<In>(std::uniform_real_distribution<double>(-2, 2)(rng));
      }
    }
    return v;
  };
  const std::vector<In> a = random(m * k), b = random(k * n);
  Tensor lhs = MakeTensor(a), rhs = MakeTensor(b);
  lhs = lhs.Reshaped({m, k});
  rhs = rhs.Reshaped({k, n});
  ir::Op op = MakeOp("dot_general");
  op.mutable_dot_general()->add_lhs_contracting_dims(1);
  op.mutable_dot_general()->add_rhs_contracting_dims(0);
  op.mutable_dot_general()->set_preferred_element_type(
      static_cast<ir::DTypeProto>(ir::kDTypeOf<Out>));
  const std::vector<Out> got = Values<Out>(Eval(op, {lhs, rhs}));
  ASSERT_EQ(static_cast<int64_t>(got.size()), m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      if constexpr (kInt<Out>) {
        unsigned __int128 acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += static_cast<unsigned __int128>(static_cast<Int>(WrapTo<Out>(a[i * k + p]))) *
                 static_cast<unsigned __int128>(static_cast<Int>(WrapTo<Out>(b[p * n + j])));
        }
        EXPECT_EQ(+got[i * n + j], +WrapTo<Out>(static_cast<Int>(acc))) << i << "," << j;
      } else {
        long double acc = 0, magnitude = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += Wide(a[i * k + p]) * Wide(b[p * n + j]);
          magnitude += std::fabs(Wide(a[i * k + p]) * Wide(b[p * n + j]));
        }
        const long double eps = std::is_same_v<Out, double> ? 0x1p-50L
                                : std::is_same_v<Out, float> ? 0x1p-21L
                                : std::is_same_v<Out, f16> ? 0x1p-10L
                                                           : 0x1p-7L;
        EXPECT_NEAR(static_cast<double>(Wide(got[i * n + j])), static_cast<double>(acc),
                    static_cast<double>(eps * (magnitude + 1)))
            << i << "," << j;
      }
    }
  }
}

TEST(DTypes, DotOfEveryNumericDType) {
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {7, 13, 5}, {3, 64, 17}}) {
    CheckDot<int8_t, int32_t>(m, k, n);
    CheckDot<uint8_t, int32_t>(m, k, n);
    CheckDot<uint8_t, uint32_t>(m, k, n);
    CheckDot<int8_t, int8_t>(m, k, n);
    CheckDot<int16_t, int64_t>(m, k, n);
    CheckDot<int16_t, int16_t>(m, k, n);
    CheckDot<uint16_t, uint32_t>(m, k, n);
    CheckDot<uint32_t, uint32_t>(m, k, n);
    CheckDot<uint64_t, uint64_t>(m, k, n);
    CheckDot<int64_t, int64_t>(m, k, n);
    CheckDot<int8_t, float>(m, k, n);
    CheckDot<f16, f16>(m, k, n);
    CheckDot<f16, float>(m, k, n);
    CheckDot<bf16, float>(m, k, n);
    CheckDot<float, double>(m, k, n);
    CheckDot<double, double>(m, k, n);
  }
}

TEST(DTypes, DotRefusesJaxsInvalidPreferredTypes) {
  auto error = [](DType in, DType out) {
    ir::Op op = MakeOp("dot_general");
    op.mutable_dot_general()->add_lhs_contracting_dims(1);
    op.mutable_dot_general()->add_rhs_contracting_dims(0);
    op.mutable_dot_general()->set_preferred_element_type(static_cast<ir::DTypeProto>(out));
    auto r = ir::InferResultTypes({}, {{in, {2, 3}}, {in, {3, 4}}}, op);
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  EXPECT_THAT(error(DType::kF32, DType::kS32), ::testing::HasSubstr("is incompatible"));
  EXPECT_THAT(error(DType::kS8, DType::kU32), ::testing::HasSubstr("same signedness"));
  EXPECT_THAT(error(DType::kS32, DType::kS16), ::testing::HasSubstr("must not be narrower"));
  EXPECT_THAT(error(DType::kF64, DType::kF32), ::testing::HasSubstr("must not be narrower"));
  EXPECT_EQ(error(DType::kU8, DType::kS32), "");
  EXPECT_EQ(error(DType::kS8, DType::kF32), "");
}

template <typename T>
void CheckSortAndTopK() {
  SCOPED_TRACE(std::string(ir::DTypeName(ir::kDTypeOf<T>)));
  for (int64_t n : {int64_t{17}, int64_t{3000}}) {  // the short and the radix path
    std::vector<T> v = Operands<T>(5).first;
    v.resize(n, v[0]);
    if constexpr (!kInt<T>) {  // NaN sorts last; -0 and +0 compare equal (kept in order)
      std::erase_if(v, [](T x) { return IsNaN(x); });
    }
    std::vector<T> want = v;
    std::stable_sort(want.begin(), want.end(), [](T x, T y) { return Wide(x) < Wide(y); });
    ir::Op sort = MakeOp("sort");
    sort.mutable_sort()->set_dimension(0);
    sort.mutable_sort()->set_num_keys(1);
    sort.mutable_sort()->set_is_stable(true);
    const std::vector<T> got = Values<T>(Eval(sort, {MakeTensor(v)}));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(T)), 0)
          << i << ": " << static_cast<double>(Wide(got[i])) << " vs "
          << static_cast<double>(Wide(want[i]));
    }
    ir::Op top = MakeOp("top_k");
    top.mutable_top_k()->set_k(3);
    const std::vector<Tensor> top_out = test_util::EvalAll(top, {MakeTensor(v)});
    const std::vector<T> top_values = Values<T>(top_out[0]);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(Wide(top_values[i]), Wide(want[want.size() - 1 - i])) << i;
      EXPECT_EQ(Wide(v[top_out[1].data_as<int32_t>()[i]]), Wide(top_values[i])) << i;
    }
  }
}

TEST(DTypes, SortAndTopKOfEveryDType) {
  CheckSortAndTopK<int8_t>();
  CheckSortAndTopK<uint8_t>();
  CheckSortAndTopK<int16_t>();
  CheckSortAndTopK<uint16_t>();
  CheckSortAndTopK<uint32_t>();
  CheckSortAndTopK<int64_t>();
  CheckSortAndTopK<uint64_t>();
  CheckSortAndTopK<f16>();
  CheckSortAndTopK<double>();
}

// The scans, argmax/argmin, pad, rev, scatter and scatter_add on small integer values every dtype
// holds exactly, against loops here: forward and reverse, ties, negative and interior padding,
// repeated scatter indices; argmax/argmin take the first of equal extremes and the first NaN.
template <typename T>
void CheckScansSelectionAndIndexing() {
  SCOPED_TRACE(std::string(ir::DTypeName(ir::kDTypeOf<T>)));
  auto of = [](int v) {
    if constexpr (kInt<T>) {
      return static_cast<T>(v);
    } else {
      return RoundFloat<T>(v);
    }
  };
  const bool is_signed = !std::is_unsigned_v<T>;
  std::vector<int> ints = {3, 1, 4, 1, 5, 0, 2, 6, 5, 3, 5};
  if (is_signed) ints[5] = -2;
  std::vector<T> v;
  for (int i : ints) v.push_back(of(i));
  const int64_t n = static_cast<int64_t>(v.size());
  for (const char* name : {"cumsum", "cumprod", "cummax", "cummin"}) {
    for (bool reverse : {false, true}) {
      ir::Op op = MakeOp(name);
      op.mutable_cumulative()->set_axis(0);
      op.mutable_cumulative()->set_reverse(reverse);
      // cumprod of the first five only (their products stay small).
      const std::vector<T> in = std::string(name) == "cumprod"
                                    ? std::vector<T>(v.begin(), v.begin() + 5)
                                    : v;
      const std::vector<T> got = Values<T>(Eval(op, {MakeTensor(in)}));
      const int64_t m = static_cast<int64_t>(in.size());
      long double acc = 0;
      for (int64_t s = 0; s < m; ++s) {
        const int64_t i = reverse ? m - 1 - s : s;
        const long double e = Wide(in[i]);
        const std::string kind = name;
        acc = s == 0                 ? e
              : kind == "cumsum"     ? acc + e
              : kind == "cumprod"    ? acc * e
              : kind == "cummax"     ? std::max(acc, e)
                                     : std::min(acc, e);
        EXPECT_EQ(Wide(got[i]), acc) << name << (reverse ? " reverse " : " ") << i;
      }
    }
  }
  for (const char* name : {"argmax", "argmin"}) {
    ir::Op op = MakeOp(name);
    op.mutable_arg_min_max()->set_axis(0);
    op.mutable_arg_min_max()->set_index_dtype(ir::ToProto(DType::kS32));
    const bool max = std::string(name) == "argmax";
    const Tensor index = Eval(op, {MakeTensor(v)});
    // 6 at 7; the minimum (-2, or 0 unsigned) at 5.
    EXPECT_EQ(index.data_as<int32_t>()[0], max ? 7 : 5) << name;
    if constexpr (!kInt<T>) {
      std::vector<T> with_nan = v;
      with_nan[4] = with_nan[9] = RoundFloat<T>(NAN);
      const Tensor nan_index = Eval(op, {MakeTensor(with_nan)});
      EXPECT_EQ(nan_index.data_as<int32_t>()[0], 4) << name << " NaN";
    }
  }
  // Ties: the first of the equal extremes (5 at 4, 8, 10 once 6 is gone).
  std::vector<T> tied = v;
  tied[7] = of(1);
  ir::Op argmax = MakeOp("argmax");
  argmax.mutable_arg_min_max()->set_axis(0);
  argmax.mutable_arg_min_max()->set_index_dtype(ir::ToProto(DType::kS32));
  const Tensor tie = Eval(argmax, {MakeTensor(tied)});
  EXPECT_EQ(tie.data_as<int32_t>()[0], 4);
  // pad: low -1 (drops element 0), interior 1, high 2, with 9.
  ir::Op pad = MakeOp("pad");
  ir::PaddingConfigDim* d = pad.mutable_pad()->add_padding_config();
  d->set_low(-1);
  d->set_interior(1);
  d->set_high(2);
  std::vector<long double> want_pad;
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) want_pad.push_back(9);
    want_pad.push_back(Wide(v[i]));
  }
  want_pad.erase(want_pad.begin());
  want_pad.push_back(9);
  want_pad.push_back(9);
  const std::vector<T> padded = Values<T>(Eval(pad, {MakeTensor(v), MakeTensor(std::vector<T>{
                                                                       of(9)}).Reshaped({})}));
  ASSERT_EQ(padded.size(), want_pad.size());
  for (size_t i = 0; i < padded.size(); ++i) EXPECT_EQ(Wide(padded[i]), want_pad[i]) << i;
  ir::Op rev = MakeOp("rev");
  rev.mutable_rev()->add_dimensions(0);
  const std::vector<T> reversed = Values<T>(Eval(rev, {MakeTensor(v)}));
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(Wide(reversed[i]), Wide(v[n - 1 - i])) << i;
  // scatter / scatter_add of rows 1, 3, 1 of a [4, 2] table: the last write wins; adds sum.
  const Tensor table = MakeTensor(std::vector<T>(v.begin(), v.begin() + 8)).Reshaped({4, 2});
  const Tensor ids = Tensor::FromDoubles({DType::kS32, {3, 1}}, {1, 3, 1});
  const Tensor updates =
      MakeTensor(std::vector<T>{of(1), of(2), of(3), of(4), of(5), of(6)}).Reshaped({3, 2});
  for (const char* name : {"scatter", "scatter_add"}) {
    ir::Op op = MakeOp(name);
    ir::ScatterAttrs* a = op.mutable_scatter();
    a->add_update_window_dims(1);
    a->add_inserted_window_dims(0);
    a->add_scatter_dims_to_operand_dims(0);
    const std::vector<T> got = Values<T>(Eval(op, {table, ids, updates}));
    const bool add = std::string(name) == "scatter_add";
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t c = 0; c < 2; ++c) {
        long double want = Wide(v[r * 2 + c]);
        if (r == 1) want = add ? want + 1 + c + 5 + c : 5 + c;
        if (r == 3) want = add ? want + 3 + c : 3 + c;
        EXPECT_EQ(Wide(got[r * 2 + c]), want) << name << " " << r << "," << c;
      }
    }
  }
}

TEST(DTypes, ScansSelectionAndIndexingOfEveryDType) {
  CheckScansSelectionAndIndexing<int32_t>();
  CheckScansSelectionAndIndexing<float>();
  CheckScansSelectionAndIndexing<bf16>();
  CheckScansSelectionAndIndexing<int8_t>();
  CheckScansSelectionAndIndexing<uint8_t>();
  CheckScansSelectionAndIndexing<int16_t>();
  CheckScansSelectionAndIndexing<uint16_t>();
  CheckScansSelectionAndIndexing<uint32_t>();
  CheckScansSelectionAndIndexing<int64_t>();
  CheckScansSelectionAndIndexing<uint64_t>();
  CheckScansSelectionAndIndexing<f16>();
  CheckScansSelectionAndIndexing<double>();
}

// Data movement copies every element width (1, 2, 4 and 8 bytes) exactly.
template <typename T>
void CheckTransposeAndStridedSlice() {
  SCOPED_TRACE(std::string(ir::DTypeName(ir::kDTypeOf<T>)));
  std::vector<T> v(3 * 5);
  for (size_t i = 0; i < v.size(); ++i) {
    std::memset(&v[i], static_cast<int>(0x11 * (i % 15 + 1)), sizeof(T));
  }
  const Tensor x = MakeTensor(v).Reshaped({3, 5});
  ir::Op transpose = MakeOp("transpose");
  transpose.mutable_transpose()->add_permutation(1);
  transpose.mutable_transpose()->add_permutation(0);
  const std::vector<T> t = Values<T>(Eval(transpose, {x}));
  ir::Op slice = MakeOp("slice");
  for (int64_t d : {0, 1}) slice.mutable_slice()->add_start_indices(d);
  for (int64_t d : {3, 5}) slice.mutable_slice()->add_limit_indices(d);
  for (int64_t d : {2, 2}) slice.mutable_slice()->add_strides(d);
  const std::vector<T> sl = Values<T>(Eval(slice, {x}));
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      EXPECT_EQ(std::memcmp(&t[j * 3 + i], &v[i * 5 + j], sizeof(T)), 0) << i << "," << j;
    }
  }
  ASSERT_EQ(sl.size(), 4u);  // rows 0, 2; columns 1, 3
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t c = 0; c < 2; ++c) {
      EXPECT_EQ(std::memcmp(&sl[r * 2 + c], &v[(2 * r) * 5 + 1 + 2 * c], sizeof(T)), 0);
    }
  }
}

TEST(DTypes, DataMovementOfEveryWidth) {
  CheckTransposeAndStridedSlice<uint8_t>();
  CheckTransposeAndStridedSlice<int16_t>();
  CheckTransposeAndStridedSlice<f16>();
  CheckTransposeAndStridedSlice<uint32_t>();
  CheckTransposeAndStridedSlice<double>();
  CheckTransposeAndStridedSlice<uint64_t>();
}

TEST(DTypes, ConstantsAndIotaOfEveryDType) {
  for (DType d : ir::kAllDTypes) {
    if (d == DType::kPred) continue;
    ir::Op iota = MakeOp("iota");
    iota.mutable_iota()->set_dtype(static_cast<ir::DTypeProto>(d));
    iota.mutable_iota()->add_shape(100);
    const Tensor t = Eval(iota, {});
    for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(t.GetDouble(i), i) << ir::DTypeName(d);
  }
  ir::Op c = MakeOp("constant");
  c.mutable_constant()->set_dtype(ir::U8);
  c.mutable_constant()->add_value(256);
  auto r = ir::InferResultTypes({}, {}, c);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("value[0]=256 does not fit u8 (range [0, 255])"));
  c.mutable_constant()->set_dtype(ir::F16);
  c.mutable_constant()->set_value(0, 1e5);
  r = ir::InferResultTypes({}, {}, c);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("does not fit f16"));
  ir::Op iota = MakeOp("iota");
  iota.mutable_iota()->set_dtype(ir::S8);
  iota.mutable_iota()->add_shape(200);
  r = ir::InferResultTypes({}, {}, iota);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("do not fit s8"));
}

}  // namespace
}  // namespace shardjit::backends::reference
