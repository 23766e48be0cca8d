// The math and bit reference kernels against f64 oracles and hand-derived values: NaN, +-0,
// +-inf, halfway cases of round, exponents of integer_pow, shift amounts outside [0, 32).
#include <bit>

#include "backends/reference/kernel_test_util.h"

namespace shardjit::backends::reference {
namespace {

using namespace test_util;  // NOLINT

constexpr double kMinSubnormal = 1.401298464324817e-45;

Tensor Vector(DType dtype, const Values& v) {
  return Make(dtype, {static_cast<int64_t>(v.size())}, v);
}

// Every float unary op on random values, special values and every dtype and shape, against
// the f64 function rounded to the dtype.
TEST(Math, UnaryFloatOpsMatchF64) {
  struct Case {
    const char* name;
    double (*fn)(double);
    double range;
  };
  const Case cases[] = {
      {"sin", [](double x) { return std::sin(x); }, 100},
      {"cos", [](double x) { return std::cos(x); }, 100},
      {"tan", [](double x) { return std::tan(x); }, 3},
      {"erf", [](double x) { return std::erf(x); }, 5},
      {"log1p", [](double x) { return std::log1p(x); }, 0.999},
      {"expm1", [](double x) { return std::expm1(x); }, 80},
      {"floor", [](double x) { return std::floor(x); }, 50},
      {"ceil", [](double x) { return std::ceil(x); }, 50},
  };
  const Values special = {0.0, -0.0, kInf, -kInf, kNaN, 1e-30, -1e-30, kMinSubnormal};
  for (const Case& c : cases) {
    for (DType dtype : {kF32, kBF16}) {
      for (const Dims& dims : {Dims{}, Dims{0}, Dims{9}, Dims{3, 7}}) {
        SCOPED_TRACE(std::string(c.name) + " " + ShapedType({dtype, dims}).ToString());
        Values x = RandomValues(NumElements(dims), dtype, 7, c.range);
        if (dims == Dims{9}) {
          for (size_t i = 0; i < special.size(); ++i) x[i] = RoundTo(dtype, special[i]);
        }
        Values want(x.size());
        for (size_t i = 0; i < x.size(); ++i) want[i] = RoundTo(dtype, c.fn(x[i]));
        ExpectValues(Eval(MakeOp(c.name), {Make(dtype, dims, x)}), {dtype, dims}, want);
      }
    }
  }
}

TEST(Math, ErfInvInvertsErf) {
  const Values y = {0.0, -0.0, 0.5, -0.5, 0.999, -0.9999, 1e-7, 0.3, 1.0, -1.0, 1.5, kNaN};
  Tensor out = Eval(MakeOp("erf_inv"), {Vector(kF32, y)});
  ASSERT_EQ(out.num_elements(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < 8; ++i) {
    const double x = out.GetDouble(i);
    const float yf = static_cast<float>(y[i]);
    // erf(x) reproduces y to f32 rounding: x is within an ulp or so of erf^-1(y).
    EXPECT_NEAR(std::erf(x), yf, 4e-7 * std::max(1e-6, std::abs(static_cast<double>(yf))) + 1e-12)
        << "y=" << y[i];
  }
  EXPECT_TRUE(std::signbit(out.GetDouble(1)));  // erf_inv(-0) = -0
  EXPECT_NEAR(out.GetDouble(7), 0.27246271472675443, 1e-7);
  EXPECT_EQ(out.GetDouble(8), kInf);
  EXPECT_EQ(out.GetDouble(9), -kInf);
  EXPECT_TRUE(std::isnan(out.GetDouble(10)));
  EXPECT_TRUE(std::isnan(out.GetDouble(11)));
}

TEST(Math, RoundBothMethods) {
  const Values x = {0.5, 1.5, 2.5, -0.5, -2.5, 2.4, -2.6, -0.0, kInf, kNaN, 8388609.0};
  ir::Op away = MakeOp("round");
  away.mutable_round()->set_rounding_method(ir::AWAY_FROM_ZERO);
  ir::Op even = MakeOp("round");
  even.mutable_round()->set_rounding_method(ir::TO_NEAREST_EVEN);
  ExpectValues(Eval(away, {Vector(kF32, x)}), {kF32, {11}},
               {1, 2, 3, -1, -3, 2, -3, -0.0, kInf, kNaN, 8388609.0});
  ExpectValues(Eval(even, {Vector(kF32, x)}), {kF32, {11}},
               {0, 2, 2, -0.0, -2, 2, -3, -0.0, kInf, kNaN, 8388609.0});
  EXPECT_TRUE(std::signbit(Eval(even, {Vector(kF32, {-0.5})}).GetDouble(0)));
}

TEST(Math, SignIsFiniteAndNextafter) {
  ExpectValues(Eval(MakeOp("sign"), {Vector(kF32, {3, -2, 0.0, -0.0, kInf, -kInf, kNaN})}),
               {kF32, {7}}, {1, -1, 0.0, -0.0, 1, -1, kNaN});
  EXPECT_TRUE(std::signbit(Eval(MakeOp("sign"), {Vector(kF32, {-0.0})}).GetDouble(0)));
  ExpectValues(Eval(MakeOp("sign"), {Vector(kS32, {5, -7, 0, kIntMin})}), {kS32, {4}},
               {1, -1, 0, -1});
  ExpectValues(Eval(MakeOp("is_finite"), {Vector(kBF16, {1, kInf, -kInf, kNaN, 0})}),
               {kPred, {5}}, {1, 0, 0, 0, 1});
  ExpectValues(Eval(MakeOp("nextafter"),
                    {Vector(kF32, {0.0, 1.0, 1.0, -0.0, kNaN, 2.0}),
                     Vector(kF32, {1.0, 2.0, 0.0, -1.0, 1.0, 2.0})}),
               {kF32, {6}},
               {kMinSubnormal, 1.0000001192092896, 0.99999994039535522, -kMinSubnormal, kNaN,
                2.0});
  // bf16 steps by its own ulp: 1 -> 1 + 2^-7, 1 -> 1 - 2^-8, 0 -> the smallest bf16 subnormal.
  ExpectValues(Eval(MakeOp("nextafter"),
                    {Vector(kBF16, {1.0, 1.0, 0.0}), Vector(kBF16, {2.0, 0.0, -1.0})}),
               {kBF16, {3}}, {1.0078125, 0.99609375, -9.183549615799121e-41});
}

TEST(Math, IntegerPowMultipliesInTheOperandType) {
  for (int64_t y : {0, 1, 2, 3, 5, 8, 13, -1, -2, -3}) {
    SCOPED_TRACE(y);
    ir::Op op = MakeOp("integer_pow");
    op.mutable_integer_pow()->set_y(y);
    const Values x = {1.5, -2.0, 0.0, -0.75, 3.0, kInf, kNaN};
    // Powers of 1.5, 2, 0.75 and 3 up to 13 are exact in f32, so the f64 power (and for y < 0
    // its reciprocal rounded once) is the oracle.
    Values want;
    for (double v : x) {
      const double power = std::pow(v, static_cast<double>(std::abs(y)));
      want.push_back(RoundTo(kF32, y < 0 ? 1.0 / power : power));
    }
    ExpectValues(Eval(op, {Vector(kF32, x)}), {kF32, {7}}, want);
    if (y >= 0) {
      Values xi = {3, -2, 0, 7, 46341};
      Values want_i;
      for (double v : xi) {
        uint32_t acc = 1;
        for (int64_t k = 0; k < y; ++k) acc *= static_cast<uint32_t>(static_cast<int32_t>(v));
        want_i.push_back(static_cast<int32_t>(acc));
      }
      ExpectValues(Eval(op, {Vector(kS32, xi)}), {kS32, {5}}, want_i);
    }
  }
  // bf16 rounds every product: 1.0078125^2 = 1.01568603515625 is 1.015625 in bf16, and its
  // square 1.031494140625 rounds to 1.03125 (the f64 power, 1.0315..., would too: use ^3,
  // 1.0078125 * 1.015625 = 1.0236..., which rounds to 1.0234375).
  ir::Op cube = MakeOp("integer_pow");
  cube.mutable_integer_pow()->set_y(3);
  ExpectValues(Eval(cube, {Vector(kBF16, {1.0078125})}), {kBF16, {1}}, {1.0234375});
}

TEST(Math, BinaryFloatOps) {
  ExpectValues(Eval(MakeOp("pow"), {Vector(kF32, {2, 9, -8, 0, 0, 1, kNaN, -1}),
                                    Vector(kF32, {10, 0.5, 3, 0, -1, kNaN, 0, kInf})}),
               {kF32, {8}}, {1024, 3, -512, 1, kInf, 1, 1, 1});
  ExpectValues(Eval(MakeOp("atan2"), {Vector(kF32, {1, 1, -1, 0.0, -0.0, 0.0}),
                                      Vector(kF32, {1, -1, -1, -1, -1, 1})}),
               {kF32, {6}},
               {RoundTo(kF32, M_PI / 4), RoundTo(kF32, 3 * M_PI / 4),
                RoundTo(kF32, -3 * M_PI / 4), RoundTo(kF32, M_PI), RoundTo(kF32, -M_PI), 0});
}

TEST(Math, BitsOfS32AndPred) {
  const Tensor a = Vector(kS32, {12, -1, kIntMin, 0x0f0f0f0f});
  const Tensor b = Vector(kS32, {10, 7, -1, 0x00ff00ff});
  ExpectValues(Eval(MakeOp("and"), {a, b}), {kS32, {4}}, {8, 7, kIntMin, 0x000f000f});
  ExpectValues(Eval(MakeOp("or"), {a, b}), {kS32, {4}}, {14, -1, -1, 0x0fff0fff});
  ExpectValues(Eval(MakeOp("xor"), {a, b}), {kS32, {4}}, {6, -8, kIntMax, 0x0ff00ff0});
  ExpectValues(Eval(MakeOp("not"), {a}), {kS32, {4}}, {-13, 0, kIntMax, -0x0f0f0f10});
  ExpectValues(Eval(MakeOp("population_count"), {a}), {kS32, {4}}, {2, 32, 1, 16});
  const Tensor p = Vector(kPred, {0, 0, 1, 1});
  const Tensor q = Vector(kPred, {0, 1, 0, 1});
  ExpectValues(Eval(MakeOp("and"), {p, q}), {kPred, {4}}, {0, 0, 0, 1});
  ExpectValues(Eval(MakeOp("or"), {p, q}), {kPred, {4}}, {0, 1, 1, 1});
  ExpectValues(Eval(MakeOp("xor"), {p, q}), {kPred, {4}}, {0, 1, 1, 0});
  ExpectValues(Eval(MakeOp("not"), {p}), {kPred, {4}}, {1, 1, 0, 0});
}

TEST(Math, ShiftsOutsideTheWidthGiveZeroOrTheSign) {
  const Tensor x = Vector(kS32, {1, -8, -8, 3, -3, 5, -5});
  const Tensor n = Vector(kS32, {31, 1, 2, 32, 40, -1, -1});
  ExpectValues(Eval(MakeOp("shift_left"), {x, n}), {kS32, {7}}, {kIntMin, -16, -32, 0, 0, 0, 0});
  ExpectValues(Eval(MakeOp("shift_right_logical"), {x, n}), {kS32, {7}},
               {0, 0x7ffffffc, 0x3ffffffe, 0, 0, 0, 0});
  ExpectValues(Eval(MakeOp("shift_right_arithmetic"), {x, n}), {kS32, {7}},
               {0, -4, -2, 0, -1, 0, -1});
}

// The shape rules: dtypes each op takes, attributes in range.
TEST(Math, ShapeRulesRefuseBadOperandsAndAttributes) {
  auto error = [](ir::Op op, std::vector<ShapedType> types) {
    return std::string(ir::InferResultTypes({}, types, op).status().message());
  };
  EXPECT_EQ(error(MakeOp("sin"), {{kS32, {3}}}), "sin: needs a floating dtype, got s32; operands s32[3]");
  EXPECT_EQ(error(MakeOp("shift_left"), {{kF32, {3}}, {kF32, {3}}}),
            "shift_left: needs an integer dtype, got f32; operands f32[3], f32[3]");
  EXPECT_EQ(error(MakeOp("and"), {{kS32, {3}}, {kPred, {3}}}),
            "and: operand types differ (s32[3] vs pred[3]); operands s32[3], pred[3]");
  ir::Op pow = MakeOp("integer_pow");
  pow.mutable_integer_pow()->set_y(-2);
  EXPECT_EQ(error(pow, {{kS32, {}}}),
            "integer_pow: integers cannot be raised to negative powers (y=-2); operands s32[]");
  pow.mutable_integer_pow()->set_y(int64_t{1} << 40);
  EXPECT_EQ(error(pow, {{kF32, {}}}),
            "integer_pow: y=1099511627776 does not fit in s32; operands f32[]");
  ir::Op round = MakeOp("round");
  round.mutable_round()->set_rounding_method(static_cast<ir::RoundingMethod>(7));
  EXPECT_EQ(error(round, {{kF32, {}}}),
            "round: rounding_method=7 is not a known method (AWAY_FROM_ZERO or "
            "TO_NEAREST_EVEN); operands f32[]");
  EXPECT_EQ(ir::InferResultTypes({}, {{kBF16, {2, 3}}}, MakeOp("is_finite"))->at(0),
            (ShapedType{kPred, {2, 3}}));
}

}  // namespace
}  // namespace shardjit::backends::reference
