// The elementwise reference kernels against hand-derived values and double-precision oracles.
#include "backends/reference/kernel_test_util.h"

namespace shardjit::backends::reference {
namespace {

using namespace test_util;  // NOLINT


double IntBinary(const std::string& name, int64_t a, int64_t b) {
  if (name == "add") return a + b;
  if (name == "sub") return a - b;
  if (name == "mul") return static_cast<int32_t>(static_cast<uint32_t>(a * b));
  if (name == "div") return b == 0 ? -1 : a == kIntMin && b == -1 ? kIntMin : a / b;
  if (name == "rem") return b == 0 ? a : b == -1 ? 0 : a % b;
  if (name == "max") return std::max(a, b);
  return std::min(a, b);
}

double FloatBinary(const std::string& name, double a, double b) {
  if (name == "add") return a + b;
  if (name == "sub") return a - b;
  if (name == "mul") return a * b;
  if (name == "div") return a / b;
  if (name == "rem") return std::fmod(a, b);
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  return name == "max" ? std::max(a, b) : std::min(a, b);
}

TEST(Elementwise, BinaryOpsMatchOracle) {
  const Dims shapes[] = {{}, {1}, {7}, {3, 5}, {2, 1, 3}, {0, 4}};
  for (const char* name : {"add", "sub", "mul", "div", "rem", "max", "min"}) {
    for (DType dtype : {kF32, kBF16, kS32}) {
      for (const Dims& dims : shapes) {
        SCOPED_TRACE(std::string(name) + " " + ShapedType({dtype, dims}).ToString());
        int64_t n = NumElements(dims);
        Values a = RandomValues(n, dtype, 1, 1000), b = RandomValues(n, dtype, 2, 1000);
        Values want(n);
        for (int64_t i = 0; i < n; ++i) {
          want[i] = dtype == kS32
                        ? IntBinary(name, a[i], b[i])
                        : FloatBinary(name, static_cast<float>(a[i]), static_cast<float>(b[i]));
          want[i] = RoundTo(dtype, dtype == kS32 ? want[i] : static_cast<float>(want[i]));
        }
        Tensor out = Eval(MakeOp(name), {Make(dtype, dims, a), Make(dtype, dims, b)});
        ExpectValues(out, {dtype, dims}, want);
      }
    }
  }
}

TEST(Elementwise, IntegerDivisionEdgeCases) {
  Values a = {7, -7, kIntMin, 5, 0, -9, 9};
  Values b = {0, 0, -1, -2, 0, 4, -4};
  Tensor x = Make(kS32, {7}, a), y = Make(kS32, {7}, b);
  ExpectValues(Eval(MakeOp("div"), {x, y}), {kS32, {7}}, {-1, -1, kIntMin, -2, -1, -2, -2});
  ExpectValues(Eval(MakeOp("rem"), {x, y}), {kS32, {7}}, {7, -7, 0, 1, 0, -1, 1});
}

TEST(Elementwise, IntegerArithmeticWraps) {
  Tensor x = Make(kS32, {3}, {kIntMax, kIntMin, 65536});
  Tensor y = Make(kS32, {3}, {1, 1, 65536});
  ExpectValues(Eval(MakeOp("add"), {x, y}), {kS32, {3}}, {kIntMin, kIntMin + 1, 131072});
  ExpectValues(Eval(MakeOp("sub"), {x, y}), {kS32, {3}}, {kIntMax - 1, kIntMax, 0});
  ExpectValues(Eval(MakeOp("mul"), {x, y}), {kS32, {3}}, {kIntMax, kIntMin, 0});
  ExpectValues(Eval(MakeOp("neg"), {x}), {kS32, {3}}, {-kIntMax, kIntMin, -65536});
  ExpectValues(Eval(MakeOp("abs"), {Make(kS32, {3}, {kIntMin, -5, 5})}), {kS32, {3}},
               {kIntMin, 5, 5});
}

TEST(Elementwise, MaxMinPropagateNaN) {
  for (DType dtype : {kF32, kBF16}) {
    Tensor x = Make(dtype, {4}, {kNaN, 1, -0.5, kNaN});
    Tensor y = Make(dtype, {4}, {1, kNaN, 2, kNaN});
    ExpectValues(Eval(MakeOp("max"), {x, y}), {dtype, {4}}, {kNaN, kNaN, 2, kNaN});
    ExpectValues(Eval(MakeOp("min"), {x, y}), {dtype, {4}}, {kNaN, kNaN, -0.5, kNaN});
  }
}

// The shape rules reject pred, but the kernels support it as or / and.
TEST(Elementwise, PredMaxMinAreOrAnd) {
  Tensor x = Make(kPred, {4}, {0, 0, 1, 1}), y = Make(kPred, {4}, {0, 1, 0, 1});
  ExpectValues(EvalUnchecked(MakeOp("max"), {x, y}, {kPred, {4}}), {kPred, {4}}, {0, 1, 1, 1});
  ExpectValues(EvalUnchecked(MakeOp("min"), {x, y}, {kPred, {4}}), {kPred, {4}}, {0, 0, 0, 1});
}

TEST(Elementwise, Bf16RoundsToNearestEven) {
  Tensor one = Make(kBF16, {2}, {1, 1});
  Tensor eps = Make(kBF16, {2}, {0.00390625, 0.01171875});
  ExpectValues(Eval(MakeOp("add"), {one, eps}), {kBF16, {2}}, {1.0, 1.015625});
  EXPECT_EQ(static_cast<float>(ir::bf16(1.00390625f)), 1.0f);
  EXPECT_EQ(static_cast<float>(ir::bf16(1.01171875f)), 1.015625f);
}

TEST(Elementwise, UnaryOpsMatchOracle) {
  struct Case {
    const char* name;
    std::function<double(double)> fn;
    bool integer;
  };
  const Case cases[] = {
      {"neg", [](double x) { return -x; }, true},
      {"abs", [](double x) { return std::abs(x); }, true},
      {"exp", [](double x) { return std::exp(x); }, false},
      {"log", [](double x) { return std::log(x); }, false},
      {"tanh", [](double x) { return std::tanh(x); }, false},
      {"sqrt", [](double x) { return std::sqrt(x); }, false},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }, false},
      {"logistic", [](double x) { return 1 / (1 + std::exp(-x)); }, false},
  };
  for (const Case& c : cases) {
    for (DType dtype : {kF32, kBF16, kS32}) {
      if (dtype == kS32 && !c.integer) continue;
      for (const Dims& dims : {Dims{}, Dims{5, 3}, Dims{0}}) {
        SCOPED_TRACE(std::string(c.name) + " " + ShapedType({dtype, dims}).ToString());
        int64_t n = NumElements(dims);
        Values x = RandomValues(n, dtype, 3, 8);
        if (std::string(c.name).find("sqrt") != std::string::npos || c.name == std::string("log")) {
          for (double& v : x) v = std::abs(v) + 0.25;
          x = Make(dtype, dims, x).ToDoubles();
        }
        Values want(n);
        for (int64_t i = 0; i < n; ++i) want[i] = RoundTo(dtype, c.fn(x[i]));
        double tol = c.integer ? 0 : dtype == kF32 ? 1e-6 : 8e-3;
        ExpectValues(Eval(MakeOp(c.name), {Make(dtype, dims, x)}), {dtype, dims}, want, tol);
      }
    }
  }
  ExpectValues(Eval(MakeOp("log"), {Make(kF32, {3}, {0, -1, 1})}), {kF32, {3}}, {-kInf, kNaN, 0});
  ExpectValues(Eval(MakeOp("rsqrt"), {Make(kF32, {2}, {4, 0})}), {kF32, {2}}, {0.5, kInf});
}

ir::Op CompareOp(ir::ComparisonDirection direction) {
  ir::Op op = MakeOp("compare");
  op.mutable_compare()->set_direction(direction);
  return op;
}

TEST(Elementwise, Compare) {
  const std::pair<ir::ComparisonDirection, std::function<bool(double, double)>> dirs[] = {
      {ir::EQ, [](double a, double b) { return a == b; }},
      {ir::NE, [](double a, double b) { return a != b; }},
      {ir::LT, [](double a, double b) { return a < b; }},
      {ir::LE, [](double a, double b) { return a <= b; }},
      {ir::GT, [](double a, double b) { return a > b; }},
      {ir::GE, [](double a, double b) { return a >= b; }},
  };
  std::vector<std::pair<Values, Values>> inputs = {
      {{1, 2, 3, kNaN, kNaN, -0.0}, {2, 2, 1, 1, kNaN, 0.0}},  // floats
      {{1, 2, 3, kIntMin, kIntMax, -5}, {2, 2, 1, kIntMax, kIntMin, -5}},
      {{0, 0, 1, 1, 1, 0}, {0, 1, 0, 1, 1, 0}},
  };
  for (const auto& [dir, fn] : dirs) {
    for (DType dtype : {kF32, kBF16, kS32, kPred}) {
      const auto& [a, b] = inputs[dtype == kS32 ? 1 : dtype == kPred ? 2 : 0];
      Values want;
      for (size_t i = 0; i < a.size(); ++i) want.push_back(fn(a[i], b[i]));
      SCOPED_TRACE(std::to_string(dir) + " " + std::string(ir::DTypeName(dtype)));
      ExpectValues(Eval(CompareOp(dir), {Make(dtype, {2, 3}, a), Make(dtype, {2, 3}, b)}),
                   {kPred, {2, 3}}, want);
    }
  }
}

TEST(Elementwise, Select) {
  for (DType dtype : {kF32, kBF16, kS32, kPred}) {
    Tensor t = Make(dtype, {2, 2}, {1, 0, 1, 1});
    Tensor f = Make(dtype, {2, 2}, {0, 1, 0, 0});
    if (dtype != kPred) {
      t = Make(dtype, {2, 2}, {1, 2, 3, 4});
      f = Make(dtype, {2, 2}, {-1, -2, -3, -4});
    }
    Values tv = t.ToDoubles(), fv = f.ToDoubles();
    ExpectValues(Eval(MakeOp("select"), {Make(kPred, {2, 2}, {1, 0, 0, 1}), t, f}), {dtype, {2, 2}},
                 {tv[0], fv[1], fv[2], tv[3]});
    ExpectValues(Eval(MakeOp("select"), {Make(kPred, {}, {1}), t, f}), {dtype, {2, 2}}, tv);
    ExpectValues(Eval(MakeOp("select"), {Make(kPred, {}, {0}), t, f}), {dtype, {2, 2}}, fv);
  }
  ExpectValues(
      Eval(MakeOp("select"), {Make(kPred, {}, {0}), Make(kF32, {}, {1}), Make(kF32, {}, {2})}),
      {kF32, {}}, {2});
}

// Values exactly representable in `dtype` for the conversion test.
Values ConversionInputs(DType dtype) {
  switch (dtype) {
    case DType::kS32:
      return {0, 1, -1, 7, kIntMax, kIntMin, 16777217, -300};
    case DType::kPred:
      return {0, 1, 1, 0};
    default:
      return Make(dtype, {14},
                  {0, 1, -1, 2.5, -2.5, -0.7, 0.5, 1e10, -1e10, kNaN, kInf, -kInf, 1.00390625, 3e9})
          .ToDoubles();
  }
}

double ConvertOracle(DType to, double v) {
  switch (to) {
    case DType::kS32:
      if (std::isnan(v)) return 0;
      return std::clamp(std::trunc(v), kIntMin, kIntMax);
    case DType::kPred:
      return v != 0;
    default:
      return RoundTo(to, v);
  }
}

TEST(Elementwise, ConvertElementTypeAllPairs) {
  for (DType from : {kF32, kBF16, kS32, kPred}) {
    for (DType to : {kF32, kBF16, kS32, kPred}) {
      SCOPED_TRACE(std::string(ir::DTypeName(from)) + " -> " + std::string(ir::DTypeName(to)));
      Values x = ConversionInputs(from);
      Dims dims = {static_cast<int64_t>(x.size())};
      Values want;
      for (double v : x) want.push_back(ConvertOracle(to, v));
      ir::Op op = MakeOp("convert_element_type");
      op.mutable_convert_element_type()->set_new_dtype(ir::ToProto(to));
      ExpectValues(Eval(op, {Make(from, dims, x)}), {to, dims}, want);
    }
  }
  ir::Op op = MakeOp("convert_element_type");
  op.mutable_convert_element_type()->set_new_dtype(ir::BF16);
  ExpectValues(Eval(op, {Make(kF32, {2}, {1.00390625, 1.01171875})}), {kBF16, {2}},
               {1.0, 1.015625});
}

}  // namespace
}  // namespace shardjit::backends::reference
