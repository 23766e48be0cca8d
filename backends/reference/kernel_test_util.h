// Helpers shared by the reference kernel tests: building ops and tensors, oracles, checks.
#ifndef SHARDJIT_BACKENDS_REFERENCE_KERNEL_TEST_UTIL_H_
#define SHARDJIT_BACKENDS_REFERENCE_KERNEL_TEST_UTIL_H_

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

namespace shardjit::backends::reference::test_util {

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

inline Tensor Make(DType dtype, Dims dims, const Values& values) {
  return Tensor::FromDoubles({dtype, std::move(dims)}, values);
}

inline Tensor Scalar(int32_t v) { return Make(kS32, {}, {static_cast<double>(v)}); }

inline ir::Op MakeOp(const std::string& opcode) {
  ir::Op op;
  op.set_opcode(opcode);
  return op;
}

template <typename R>
inline void SetDims(R* field, const Dims& dims) {
  for (int64_t d : dims) field->Add(d);
}

// Infers the result types with the primitive's shape rule, then runs the reference kernel.
// On failure records a test failure and returns one undefined tensor.
inline std::vector<Tensor> EvalAll(ir::Op op, const std::vector<Tensor>& operands) {
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

inline Tensor Eval(const ir::Op& op, const std::vector<Tensor>& operands) {
  return EvalAll(op, operands)[0];
}

// Runs the kernel with a given result type, bypassing the shape rule.
inline Tensor EvalUnchecked(ir::Op op, const std::vector<Tensor>& operands, const ShapedType& result) {
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
inline double RoundTo(DType dtype, double v) {
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
inline void ExpectValues(const Tensor& got, const ShapedType& type, const Values& want, double tol = 0) {
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
inline Values RandomValues(int64_t n, DType dtype, uint32_t seed, double range = 4) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> real(-range, range);
  Values v(n);
  for (double& x : v) {
    x = dtype == kS32 ? std::round(real(rng)) : dtype == kPred ? rng() % 2 : real(rng);
    x = RoundTo(dtype, x);
  }
  return v;
}

inline Dims Unravel(int64_t i, const Dims& dims) {
  Dims idx(dims.size());
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    idx[d] = i % dims[d];
    i /= dims[d];
  }
  return idx;
}

inline int64_t Ravel(const Dims& idx, const Dims& dims) {
  int64_t i = 0;
  for (size_t d = 0; d < dims.size(); ++d) i = i * dims[d] + idx[d];
  return i;
}

inline int64_t NumElements(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace shardjit::backends::reference::test_util

#endif  // SHARDJIT_BACKENDS_REFERENCE_KERNEL_TEST_UTIL_H_
