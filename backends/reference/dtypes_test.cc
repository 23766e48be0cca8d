// Every dtype through the elementwise primitives and convert_element_type, against oracles
// computed here in wider arithmetic (__int128 for integers, long double for floats) on typed
// storage (no round trip through double); the other primitives are in dtypes_structure_test.cc.
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

#include "backends/reference/dtypes_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit::backends::reference {
namespace {

using namespace dtype_test_util;  // NOLINT: the helpers of both dtype tests

// ---------------------------------------------------------------------------------------------
// Integers: wrapping arithmetic, XLA's division results, shifts, bit ops, comparisons.

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

}  // namespace
}  // namespace shardjit::backends::reference
