// Tests of the reference kernels against hand-derived values and naive double-precision oracles.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/reference/kernel.h"
#include "gtest/gtest.h"
#include "ir/dtype.h"
#include "ir/primitive.h"
#include "ir/tensor.h"
#include "ir/types.h"

namespace shardjit::backends::reference {
namespace {

using ir::DType;
using ir::ShapedType;
using ir::Tensor;
using Dims = std::vector<int64_t>;
using Values = std::vector<double>;

constexpr DType kF32 = DType::kF32;
constexpr DType kBF16 = DType::kBF16;
constexpr DType kS32 = DType::kS32;
constexpr DType kPred = DType::kPred;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kIntMin = std::numeric_limits<int32_t>::min();
constexpr double kIntMax = std::numeric_limits<int32_t>::max();

Tensor Make(DType dtype, Dims dims, const Values& values) {
  return Tensor::FromDoubles({dtype, std::move(dims)}, values);
}

Tensor Scalar(int32_t v) { return Make(kS32, {}, {static_cast<double>(v)}); }

ir::Op MakeOp(const std::string& opcode) {
  ir::Op op;
  op.set_opcode(opcode);
  return op;
}

template <typename R>
void SetDims(R* field, const Dims& dims) {
  for (int64_t d : dims) field->Add(d);
}

// Infers the result types with the primitive's shape rule, then runs the reference kernel.
// On failure records a test failure and returns one undefined tensor.
std::vector<Tensor> EvalAll(ir::Op op, const std::vector<Tensor>& operands) {
  std::vector<ShapedType> types;
  for (const Tensor& t : operands) types.push_back(t.type());
  absl::StatusOr<std::vector<ShapedType>> results = ir::InferResultTypes({}, types, op);
  if (!results.ok()) {
    ADD_FAILURE() << results.status();
    return {Tensor()};
  }
  for (const ShapedType& t : *results) *op.add_result_types() = ir::ToProto(t);
  const Kernel* kernel = FindKernel(op.opcode());
  if (kernel == nullptr) {
    ADD_FAILURE() << "no kernel for " << op.opcode();
    return {Tensor()};
  }
  absl::StatusOr<std::vector<Tensor>> out = (*kernel)(op, operands, ir::HostAllocator());
  if (!out.ok()) {
    ADD_FAILURE() << out.status();
    return {Tensor()};
  }
  for (size_t i = 0; i < out->size(); ++i) EXPECT_EQ((*out)[i].type(), (*results)[i]);
  return *out;
}

Tensor Eval(const ir::Op& op, const std::vector<Tensor>& operands) {
  return EvalAll(op, operands)[0];
}

// Runs the kernel with a given result type, bypassing the shape rule.
Tensor EvalUnchecked(ir::Op op, const std::vector<Tensor>& operands, const ShapedType& result) {
  *op.add_result_types() = ir::ToProto(result);
  absl::StatusOr<std::vector<Tensor>> out =
      (*FindKernel(op.opcode()))(op, operands, ir::HostAllocator());
  if (!out.ok()) {
    ADD_FAILURE() << out.status();
    return Tensor();
  }
  return (*out)[0];
}

// v rounded to a value of `dtype` (s32 wraps, pred is v != 0).
double RoundTo(DType dtype, double v) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<float>(v);
    case DType::kBF16:
      return static_cast<float>(ir::bf16(static_cast<float>(v)));
    case DType::kS32:
      return static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(v)));
    default:
      return v != 0;
  }
}

// Expects `got` to have `type` and values within tol * max(1, |want|) of `want` (NaN == NaN).
void ExpectValues(const Tensor& got, const ShapedType& type, const Values& want, double tol = 0) {
  ASSERT_EQ(got.type(), type);
  ASSERT_EQ(static_cast<int64_t>(want.size()), got.num_elements());
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got.GetDouble(i);
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g)) << "element " << i << " got " << g;
    } else if (tol == 0) {
      EXPECT_EQ(g, want[i]) << "element " << i;
    } else {
      EXPECT_NEAR(g, want[i], tol * std::max(1.0, std::abs(want[i]))) << "element " << i;
    }
  }
}

// Deterministic values of `dtype`: integers in [-range, range] for s32, otherwise floats.
Values RandomValues(int64_t n, DType dtype, uint32_t seed, double range = 4) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> real(-range, range);
  Values v(n);
  for (double& x : v) {
    x = dtype == kS32 ? std::round(real(rng)) : dtype == kPred ? rng() % 2 : real(rng);
    x = RoundTo(dtype, x);
  }
  return v;
}

Dims Unravel(int64_t i, const Dims& dims) {
  Dims idx(dims.size());
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    idx[d] = i % dims[d];
    i /= dims[d];
  }
  return idx;
}

int64_t Ravel(const Dims& idx, const Dims& dims) {
  int64_t i = 0;
  for (size_t d = 0; d < dims.size(); ++d) i = i * dims[d] + idx[d];
  return i;
}

int64_t NumElements(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// ---- Elementwise ----

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

// ---- Data movement ----

// out[idx] = x[source(idx)] for every index of `out_dims`.
Values Gather(const Tensor& x, const Dims& out_dims,
              const std::function<Dims(const Dims&)>& source) {
  Values v = x.ToDoubles(), out;
  for (int64_t i = 0; i < NumElements(out_dims); ++i) {
    out.push_back(v[Ravel(source(Unravel(i, out_dims)), x.dims())]);
  }
  return out;
}

ir::Op BroadcastOp(const Dims& shape, const Dims& bdims) {
  ir::Op op = MakeOp("broadcast_in_dim");
  SetDims(op.mutable_broadcast_in_dim()->mutable_shape(), shape);
  SetDims(op.mutable_broadcast_in_dim()->mutable_broadcast_dimensions(), bdims);
  return op;
}

TEST(ShapeOps, BroadcastInDim) {
  struct Case {
    Dims in, shape, bdims;
  };
  const Case cases[] = {{{3, 1}, {2, 3, 4}, {1, 2}}, {{}, {2, 3}, {}},         {{3}, {3, 2}, {0}},
                        {{1, 5}, {4, 5}, {0, 1}},    {{2, 3}, {2, 3}, {0, 1}}, {{3}, {0, 3}, {1}}};
  for (DType dtype : {kF32, kBF16, kS32, kPred}) {
    for (const Case& c : cases) {
      Tensor x = Make(dtype, c.in, RandomValues(NumElements(c.in), dtype, 4));
      Values want = Gather(x, c.shape, [&](const Dims& idx) {
        Dims src;
        for (size_t i = 0; i < c.bdims.size(); ++i) {
          src.push_back(c.in[i] == 1 ? 0 : idx[c.bdims[i]]);
        }
        return src;
      });
      ExpectValues(Eval(BroadcastOp(c.shape, c.bdims), {x}), {dtype, c.shape}, want);
    }
  }
}

TEST(ShapeOps, Reshape) {
  Tensor x = Make(kS32, {2, 3}, {1, 2, 3, 4, 5, 6});
  ir::Op op = MakeOp("reshape");
  SetDims(op.mutable_reshape()->mutable_new_sizes(), {3, 1, 2});
  ExpectValues(Eval(op, {x}), {kS32, {3, 1, 2}}, {1, 2, 3, 4, 5, 6});
}

TEST(ShapeOps, Transpose) {
  const std::pair<Dims, Dims> cases[] = {{{2, 3, 4}, {2, 0, 1}},
                                         {{2, 3, 4}, {1, 2, 0}},
                                         {{5, 1, 3}, {0, 2, 1}},
                                         {{33, 17}, {1, 0}},
                                         {{}, {}},
                                         {{0, 3}, {1, 0}}};
  for (DType dtype : {kF32, kBF16, kS32, kPred}) {
    for (const auto& [dims, perm] : cases) {
      Tensor x = Make(dtype, dims, RandomValues(NumElements(dims), dtype, 5));
      Dims out_dims;
      for (int64_t p : perm) out_dims.push_back(dims[p]);
      Values want = Gather(x, out_dims, [&](const Dims& idx) {
        Dims src(dims.size());
        for (size_t i = 0; i < perm.size(); ++i) src[perm[i]] = idx[i];
        return src;
      });
      ir::Op op = MakeOp("transpose");
      SetDims(op.mutable_transpose()->mutable_permutation(), perm);
      ExpectValues(Eval(op, {x}), {dtype, out_dims}, want);
    }
  }
}

TEST(ShapeOps, Slice) {
  struct Case {
    Dims dims, start, limit, strides;
  };
  const Case cases[] = {{{5, 7}, {1, 2}, {5, 7}, {2, 3}},
                        {{5, 7}, {1, 0}, {4, 7}, {}},
                        {{4, 6, 3}, {0, 2, 0}, {4, 5, 3}, {1, 1, 1}},
                        {{4, 6}, {2, 3}, {2, 6}, {1, 2}},
                        {{9}, {0}, {9}, {4}}};
  for (DType dtype : {kF32, kBF16, kPred}) {
    for (const Case& c : cases) {
      Tensor x = Make(dtype, c.dims, RandomValues(NumElements(c.dims), dtype, 6));
      Dims steps = c.strides.empty() ? Dims(c.dims.size(), 1) : c.strides;
      Dims out_dims;
      for (size_t i = 0; i < c.dims.size(); ++i) {
        out_dims.push_back((c.limit[i] - c.start[i] + steps[i] - 1) / steps[i]);
      }
      Values want = Gather(x, out_dims, [&](const Dims& idx) {
        Dims src;
        for (size_t i = 0; i < idx.size(); ++i) src.push_back(c.start[i] + idx[i] * steps[i]);
        return src;
      });
      ir::Op op = MakeOp("slice");
      SetDims(op.mutable_slice()->mutable_start_indices(), c.start);
      SetDims(op.mutable_slice()->mutable_limit_indices(), c.limit);
      SetDims(op.mutable_slice()->mutable_strides(), c.strides);
      ExpectValues(Eval(op, {x}), {dtype, out_dims}, want);
    }
  }
}

TEST(ShapeOps, DynamicSliceClampsStarts) {
  struct Case {
    Dims dims, sizes, starts, clamped;
  };
  const Case cases[] = {{{6, 5}, {3, 2}, {-2, 4}, {0, 3}},
                        {{6, 5}, {3, 2}, {5, 1}, {3, 1}},
                        {{6, 5}, {2, 5}, {1, 0}, {1, 0}},
                        {{6, 5}, {0, 5}, {9, 0}, {6, 0}},
                        {{7}, {7}, {3}, {0}},
                        {{}, {}, {}, {}}};
  for (DType dtype : {kF32, kBF16, kS32}) {
    for (const Case& c : cases) {
      Tensor x = Make(dtype, c.dims, RandomValues(NumElements(c.dims), dtype, 7));
      std::vector<Tensor> operands = {x};
      for (int64_t s : c.starts) operands.push_back(Scalar(s));
      Values want = Gather(x, c.sizes, [&](const Dims& idx) {
        Dims src;
        for (size_t i = 0; i < idx.size(); ++i) src.push_back(c.clamped[i] + idx[i]);
        return src;
      });
      ir::Op op = MakeOp("dynamic_slice");
      SetDims(op.mutable_dynamic_slice()->mutable_slice_sizes(), c.sizes);
      ExpectValues(Eval(op, operands), {dtype, c.sizes}, want);
    }
  }
}

TEST(ShapeOps, DynamicUpdateSliceClampsStarts) {
  struct Case {
    Dims dims, update, starts, clamped;
  };
  const Case cases[] = {{{6, 5}, {3, 2}, {-2, 4}, {0, 3}},
                        {{6, 5}, {3, 2}, {5, 1}, {3, 1}},
                        {{6, 5}, {2, 5}, {1, 0}, {1, 0}},
                        {{6, 5}, {0, 2}, {1, 1}, {1, 1}},
                        {{3, 4, 5}, {1, 4, 2}, {2, 7, 1}, {2, 0, 1}}};
  for (DType dtype : {kF32, kBF16, kS32, kPred}) {
    for (const Case& c : cases) {
      Tensor x = Make(dtype, c.dims, RandomValues(NumElements(c.dims), dtype, 8));
      Tensor u = Make(dtype, c.update, RandomValues(NumElements(c.update), dtype, 9));
      std::vector<Tensor> operands = {x, u};
      for (int64_t s : c.starts) operands.push_back(Scalar(s));
      Values want = x.ToDoubles(), uv = u.ToDoubles();
      for (int64_t i = 0; i < NumElements(c.update); ++i) {
        Dims idx = Unravel(i, c.update);
        for (size_t d = 0; d < idx.size(); ++d) idx[d] += c.clamped[d];
        want[Ravel(idx, c.dims)] = uv[i];
      }
      Values before = x.ToDoubles();
      ExpectValues(Eval(MakeOp("dynamic_update_slice"), operands), {dtype, c.dims}, want);
      EXPECT_EQ(x.ToDoubles(), before);
    }
  }
}

TEST(ShapeOps, Concatenate) {
  for (DType dtype : {kF32, kBF16, kS32, kPred}) {
    for (int64_t dim : {0, 1, 2}) {
      std::vector<Dims> shapes = {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}};
      shapes[0][dim] = 1;
      shapes[1][dim] = 3;
      shapes[2][dim] = 0;
      std::vector<Tensor> operands;
      Values parts;
      Dims out_dims = {2, 3, 4};
      out_dims[dim] = 4;
      for (size_t i = 0; i < shapes.size(); ++i) {
        operands.push_back(Make(dtype, shapes[i], RandomValues(NumElements(shapes[i]), dtype, i)));
      }
      Values want;
      for (int64_t i = 0; i < NumElements(out_dims); ++i) {
        Dims idx = Unravel(i, out_dims);
        const Tensor& src = idx[dim] < 1 ? operands[0] : operands[1];
        if (idx[dim] >= 1) idx[dim] -= 1;
        want.push_back(src.GetDouble(Ravel(idx, src.dims())));
      }
      ir::Op op = MakeOp("concatenate");
      op.mutable_concatenate()->set_dimension(dim);
      ExpectValues(Eval(op, operands), {dtype, out_dims}, want);
    }
  }
}

// ---- Compute ----

TEST(Compute, Iota) {
  for (DType dtype : {kF32, kBF16, kS32}) {
    for (int64_t dim : {0, 1, 2}) {
      Dims dims = {3, 300, 2};
      ir::Op op = MakeOp("iota");
      op.mutable_iota()->set_dtype(ir::ToProto(dtype));
      SetDims(op.mutable_iota()->mutable_shape(), dims);
      op.mutable_iota()->set_dimension(dim);
      Values want;
      for (int64_t i = 0; i < NumElements(dims); ++i) {
        want.push_back(RoundTo(dtype, Unravel(i, dims)[dim]));
      }
      ExpectValues(Eval(op, {}), {dtype, dims}, want);
    }
  }
}

ir::Op ConstantOp(DType dtype, const Dims& shape, const Values& values) {
  ir::Op op = MakeOp("constant");
  op.mutable_constant()->set_dtype(ir::ToProto(dtype));
  SetDims(op.mutable_constant()->mutable_shape(), shape);
  for (double v : values) op.mutable_constant()->add_value(v);
  return op;
}

TEST(Compute, Constant) {
  ExpectValues(Eval(ConstantOp(kF32, {2, 3}, {1.5}), {}), {kF32, {2, 3}}, Values(6, 1.5));
  ExpectValues(Eval(ConstantOp(kBF16, {3}, {1.00390625}), {}), {kBF16, {3}}, {1, 1, 1});
  ExpectValues(Eval(ConstantOp(kS32, {2, 2}, {1, -2, 3, kIntMin}), {}), {kS32, {2, 2}},
               {1, -2, 3, kIntMin});
  ExpectValues(Eval(ConstantOp(kPred, {3}, {0, 2, 1}), {}), {kPred, {3}}, {0, 1, 1});
  ExpectValues(Eval(ConstantOp(kF32, {}, {-kInf}), {}), {kF32, {}}, {-kInf});
  ExpectValues(Eval(ConstantOp(kS32, {0, 4}, {7}), {}), {kS32, {0, 4}}, {});
}

// Naive reduction in double; `kind` is "sum", "max" or "min".
Values ReduceOracle(const Values& x, const Dims& dims, const Dims& axes, const std::string& kind,
                    DType dtype, Dims* out_dims) {
  out_dims->clear();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) out_dims->push_back(dims[i]);
  }
  double init = kind == "sum" ? 0 : dtype == kPred ? kind == "min" : kind == "max" ? -kInf : kInf;
  if (dtype == kS32 && kind != "sum") init = kind == "max" ? kIntMin : kIntMax;
  Values out(NumElements(*out_dims), init);
  for (int64_t i = 0; i < NumElements(dims); ++i) {
    Dims idx = Unravel(i, dims), kept;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) kept.push_back(idx[d]);
    }
    double& acc = out[Ravel(kept, *out_dims)];
    if (kind == "sum") {
      acc += x[i];
    } else if (std::isnan(acc) || std::isnan(x[i])) {
      acc = kNaN;
    } else {
      acc = kind == "max" ? std::max(acc, x[i]) : std::min(acc, x[i]);
    }
  }
  for (double& v : out) v = RoundTo(dtype, v);
  return out;
}

TEST(Compute, Reduce) {
  const Dims dims = {3, 4, 5};
  const Dims axes_list[] = {{}, {0}, {1}, {2}, {0, 2}, {2, 0}, {0, 1}, {1, 2}, {0, 1, 2}};
  for (const char* kind : {"sum", "max", "min"}) {
    for (DType dtype : {kF32, kBF16, kS32, kPred}) {
      if (dtype == kPred && std::string(kind) == "sum") continue;
      for (const Dims& axes : axes_list) {
        // Integer-valued inputs make f32 sums exact, so results must match exactly.
        Values x = RandomValues(NumElements(dims), dtype == kPred ? kPred : kS32, 10, 50);
        Dims out_dims;
        Values want = ReduceOracle(x, dims, axes, kind, dtype, &out_dims);
        ir::Op op = MakeOp(std::string("reduce_") + kind);
        SetDims(op.mutable_reduce()->mutable_axes(), axes);
        SCOPED_TRACE(std::string(kind) + " " + std::string(ir::DTypeName(dtype)));
        ExpectValues(Eval(op, {Make(dtype, dims, x)}), {dtype, out_dims}, want);
      }
    }
  }
}

TEST(Compute, ReduceFloatsAndEdgeCases) {
  Values x = RandomValues(7 * 9, kF32, 11);
  Dims out_dims;
  Values want = ReduceOracle(x, {7, 9}, {1}, "sum", kF32, &out_dims);
  ir::Op sum = MakeOp("reduce_sum");
  sum.mutable_reduce()->add_axes(1);
  ExpectValues(Eval(sum, {Make(kF32, {7, 9}, x)}), {kF32, {7}}, want, 1e-5);

  for (DType dtype : {kF32, kBF16, kS32, kPred}) {
    for (const char* kind : {"sum", "max", "min"}) {
      if (dtype == kPred && std::string(kind) == "sum") continue;
      ir::Op op = MakeOp(std::string("reduce_") + kind);
      op.mutable_reduce()->add_axes(0);
      Values want = ReduceOracle({}, {0, 2}, {0}, kind, dtype, &out_dims);
      ExpectValues(Eval(op, {Make(dtype, {0, 2}, {})}), {dtype, {2}}, want);
    }
  }
  ir::Op max = MakeOp("reduce_max");
  max.mutable_reduce()->add_axes(1);
  ExpectValues(Eval(max, {Make(kF32, {2, 3}, {1, kNaN, 3, 4, 5, 6})}), {kF32, {2}}, {kNaN, 6});
}

struct DotCase {
  Dims lhs, rhs, lc, rc, lb, rb;
};

ir::Op DotOp(const DotCase& c, DType preferred) {
  ir::Op op = MakeOp("dot_general");
  auto* a = op.mutable_dot_general();
  SetDims(a->mutable_lhs_contracting_dims(), c.lc);
  SetDims(a->mutable_rhs_contracting_dims(), c.rc);
  SetDims(a->mutable_lhs_batch_dims(), c.lb);
  SetDims(a->mutable_rhs_batch_dims(), c.rb);
  a->set_preferred_element_type(ir::ToProto(preferred));
  return op;
}

// Naive dot_general in double. `abs_sum` receives sum |l*r| per element (the error scale).
Values DotOracle(const DotCase& c, const Values& l, const Values& r, Dims* out_dims,
                 Values* abs_sum) {
  auto free_dims = [](const Dims& dims, const Dims& b, const Dims& k) {
    Dims f;
    for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
      if (std::find(b.begin(), b.end(), i) == b.end() &&
          std::find(k.begin(), k.end(), i) == k.end()) {
        f.push_back(i);
      }
    }
    return f;
  };
  Dims lf = free_dims(c.lhs, c.lb, c.lc), rf = free_dims(c.rhs, c.rb, c.rc);
  Dims k_dims;
  out_dims->clear();
  for (int64_t d : c.lb) out_dims->push_back(c.lhs[d]);
  for (int64_t d : lf) out_dims->push_back(c.lhs[d]);
  for (int64_t d : rf) out_dims->push_back(c.rhs[d]);
  for (int64_t d : c.lc) k_dims.push_back(c.lhs[d]);
  Values out(NumElements(*out_dims));
  abs_sum->assign(out.size(), 0);
  for (size_t o = 0; o < out.size(); ++o) {
    Dims idx = Unravel(o, *out_dims);
    Dims li(c.lhs.size()), ri(c.rhs.size());
    size_t p = 0;
    for (size_t i = 0; i < c.lb.size(); ++i, ++p) li[c.lb[i]] = ri[c.rb[i]] = idx[p];
    for (int64_t d : lf) li[d] = idx[p++];
    for (int64_t d : rf) ri[d] = idx[p++];
    for (int64_t k = 0; k < NumElements(k_dims); ++k) {
      Dims ki = Unravel(k, k_dims);
      for (size_t i = 0; i < ki.size(); ++i) li[c.lc[i]] = ri[c.rc[i]] = ki[i];
      double prod = l[Ravel(li, c.lhs)] * r[Ravel(ri, c.rhs)];
      out[o] += prod;
      (*abs_sum)[o] += std::abs(prod);
    }
  }
  return out;
}

void CheckDot(const DotCase& c, DType in, DType preferred) {
  DType out_dtype = preferred == DType::kInvalid ? in : preferred;
  SCOPED_TRACE(ShapedType({in, c.lhs}).ToString() + " x " + ShapedType({in, c.rhs}).ToString() +
               " -> " + std::string(ir::DTypeName(out_dtype)));
  Values l = RandomValues(NumElements(c.lhs), in, 12, 3);
  Values r = RandomValues(NumElements(c.rhs), in, 13, 3);
  Dims out_dims;
  Values abs_sum;
  Values want = DotOracle(c, l, r, &out_dims, &abs_sum);
  Tensor got = Eval(DotOp(c, preferred), {Make(in, c.lhs, l), Make(in, c.rhs, r)});
  ASSERT_EQ(got.type(), (ShapedType{out_dtype, out_dims}));
  double rounding = out_dtype == kBF16 ? 1.0 / 256 : out_dtype == kF32 ? 1e-7 : 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (out_dtype == kS32) {
      EXPECT_EQ(got.GetDouble(i), RoundTo(kS32, want[i])) << "element " << i;
      continue;
    }
    double tol = 1e-6 * abs_sum[i] + rounding * std::abs(want[i]);
    EXPECT_NEAR(got.GetDouble(i), want[i], tol) << "element " << i;
  }
}

TEST(Compute, DotGeneral) {
  const DotCase cases[] = {
      {{7, 13}, {13, 5}, {1}, {0}, {}, {}},                    // plain matmul
      {{13, 7}, {13, 5}, {0}, {0}, {}, {}},                    // transposed lhs
      {{7, 13}, {5, 13}, {1}, {1}, {}, {}},                    // transposed rhs
      {{1, 1}, {1, 1}, {1}, {0}, {}, {}},                      // 1x1x1
      {{33, 65}, {65, 17}, {1}, {0}, {}, {}},                  // odd sizes
      {{200, 600}, {600, 40}, {1}, {0}, {}, {}},               // several M and K blocks
      {{4, 3, 5}, {5, 3, 6}, {2}, {0}, {1}, {1}},              // batch dims not leading
      {{2, 3, 4, 5}, {5, 7, 3}, {1, 3}, {2, 0}, {}, {}},       // two contracting dims
      {{3, 2, 4, 5}, {4, 5, 6, 3}, {3}, {1}, {0, 2}, {3, 0}},  // two batch dims, permuted
      {{6}, {6}, {0}, {0}, {}, {}},                            // vector dot: rank-0 result
      {{3, 4}, {5, 6}, {}, {}, {}, {}},                        // outer product
      {{3, 0}, {0, 4}, {1}, {0}, {}, {}},                      // empty contraction
      {{0, 4}, {4, 3}, {1}, {0}, {}, {}},                      // empty result
  };
  for (const DotCase& c : cases) {
    CheckDot(c, kF32, DType::kInvalid);
    CheckDot(c, kBF16, DType::kInvalid);
    CheckDot(c, kBF16, kF32);
    CheckDot(c, kS32, DType::kInvalid);
    CheckDot(c, kS32, kF32);
  }
}

TEST(Compute, DotGeneralBf16RoundsOnce) {
  // 1 + 3 * 2^-8 accumulated in f32 is exact; a single rounding to bf16 gives 1.015625, whereas
  // rounding after each step would stay at 1.0.
  DotCase c = {{1, 4}, {4, 1}, {1}, {0}, {}, {}};
  Tensor l = Make(kBF16, {1, 4}, {1, 0.00390625, 0.00390625, 0.00390625});
  Tensor r = Make(kBF16, {4, 1}, {1, 1, 1, 1});
  ExpectValues(Eval(DotOp(c, DType::kInvalid), {l, r}), {kBF16, {1, 1}}, {1.015625});
}

TEST(Registry, EveryLocalPrimitiveHasAKernel) {
  int count = 0;
  for (const ir::Primitive* p : ir::AllPrimitives()) {
    if (p->kind != ir::PrimitiveKind::kElementwise && p->kind != ir::PrimitiveKind::kStructural) {
      continue;
    }
    ++count;
    EXPECT_NE(FindKernel(p->name), nullptr) << p->name;
  }
  EXPECT_GT(count, 30);
}

}  // namespace
}  // namespace shardjit::backends::reference
