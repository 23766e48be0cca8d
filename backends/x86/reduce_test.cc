// The x86 reductions over ranks 1-4, unit, odd, prime and empty dims, every combination of axes,
// f32 and bf16, at every ISA level of this host: sums against an f64 oracle within the rounding
// error bound of their length, max/min bit for bit against the reference kernel (NaN payloads and
// signs of zero included); other dtypes fall back (Unimplemented).
#include "backends/x86/reduce.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backends/reference/kernel.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/isa_test_util.h"
#include "gtest/gtest.h"
#include "ir/primitive.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

using Dims = std::vector<int64_t>;
using ir::DType;
using ir::Tensor;

// Sizes around the vector width (8), the 4-accumulator step (32) and the column block (2048).
const std::vector<Dims> kShapes = {
    {1},        {7},       {0},         {37},         {1000},         {1, 1},        {3, 5},
    {8, 33},    {33, 8},   {13, 67},    {3, 4099},    {3, 0},         {1, 9, 1},     {4, 9, 35},
    {3, 1, 17}, {2, 0, 3}, {40, 3, 16}, {2, 3, 5, 7}, {5, 1, 13, 40}, {2, 11, 1, 9}, {3, 2, 0, 5}};

const char* const kOps[] = {"reduce_sum", "reduce_max", "reduce_min"};

ir::Op ReduceOp(const std::string& name, const Tensor& x, const Dims& axes) {
  ir::Op op;
  op.set_opcode(name);
  op.mutable_reduce();  // set even when there are no axes
  for (int64_t a : axes) op.mutable_reduce()->add_axes(a);
  absl::StatusOr<std::vector<ir::ShapedType>> types = ir::InferResultTypes({}, {x.type()}, op);
  EXPECT_TRUE(types.ok()) << types.status();
  if (types.ok()) *op.add_result_types() = ir::ToProto((*types)[0]);
  return op;
}

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Sums: normal values. max/min: few distinct values so that ties are common, signed zeros,
// infinities and (with `nans`) NaNs with four different payloads.
Tensor Values(DType dtype, const Dims& dims, bool sum, bool nans, std::mt19937& rng) {
  Tensor t = Tensor::Empty({dtype, dims});
  std::normal_distribution<float> normal;
  const float specials[] = {0.0f,
                            -0.0f,
                            1.5f,
                            -1.5f,
                            INFINITY,
                            -INFINITY,
                            FromBits(0x7fc00001u),
                            FromBits(0xffc00002u),
                            FromBits(0x7fa00000u),
                            FromBits(0xff900000u)};
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    float v;
    if (sum) {
      v = normal(rng);
    } else {
      const uint32_t r = rng() % 100;
      v = r < 50   ? specials[r % 4]
          : r < 90 ? normal(rng)
          : r < 98 ? specials[4 + r % 2]
          : nans   ? specials[6 + r % 4]
                   : 0.0f;
    }
    if (dtype == DType::kF32) {
      t.data_as<float>()[i] = v;
    } else {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      // Truncation keeps the NaN payloads' top bits distinct.
      t.data_as<ir::bf16>()[i].bits = static_cast<uint16_t>(bits >> 16);
    }
  }
  return t;
}

// Every subset of {0, ..., rank - 1}.
std::vector<Dims> AxisSubsets(int64_t rank) {
  std::vector<Dims> subsets;
  for (int64_t mask = 0; mask < (int64_t{1} << rank); ++mask) {
    Dims axes;
    for (int64_t d = 0; d < rank; ++d) {
      if (mask & (int64_t{1} << d)) axes.push_back(d);
    }
    subsets.push_back(axes);
  }
  return subsets;
}

// Per output element: the exact sum (f64) and the sum of magnitudes and count of its inputs.
struct SumOracle {
  std::vector<double> sum, magnitude;
  int64_t count = 1;
};

SumOracle ExactSums(const Tensor& x, const Dims& axes, int64_t out_elements) {
  SumOracle o;
  o.sum.assign(out_elements, 0.0);
  o.magnitude.assign(out_elements, 0.0);
  const Dims& dims = x.dims();
  for (int64_t a : axes) o.count *= dims[a];
  Dims idx(dims.size(), 0);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    int64_t out = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end()) {
        out = out * dims[d] + idx[d];
      }
    }
    const double v = x.GetDouble(i);
    o.sum[out] += v;
    o.magnitude[out] += std::abs(v);
    for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
  return o;
}

class ReduceTest : public IsaLevelTest {
 protected:
  absl::StatusOr<std::vector<Tensor>> Run(const ir::Op& op, const Tensor& x) {
    if (op.opcode() == "reduce_sum") return ReduceSumKernel(op, {x}, ir::HostAllocator());
    if (op.opcode() == "reduce_max") return ReduceMaxKernel(op, {x}, ir::HostAllocator());
    return ReduceMinKernel(op, {x}, ir::HostAllocator());
  }

  std::mt19937 rng_{11};
};

TEST_P(ReduceTest, SumsAreWithinTheRoundingBoundOfTheExactSum) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (const Dims& dims : kShapes) {
      const Tensor x = Values(dtype, dims, /*sum=*/true, /*nans=*/false, rng_);
      for (const Dims& axes : AxisSubsets(static_cast<int64_t>(dims.size()))) {
        const ir::Op op = ReduceOp("reduce_sum", x, axes);
        const std::string what = x.type().ToString() + " axes " + ::testing::PrintToString(axes);
        absl::StatusOr<std::vector<Tensor>> got = Run(op, x);
        ASSERT_TRUE(got.ok()) << what << ": " << got.status();
        const Tensor& g = (*got)[0];
        ASSERT_EQ(g.type(), reference::ResultType(op)) << what;
        const SumOracle oracle = ExactSums(x, axes, g.num_elements());
        // f32 accumulation in any order: at most count * 2^-24 * sum |x| away, plus the final
        // rounding to the result dtype.
        const double rounding = dtype == DType::kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -24);
        for (int64_t i = 0; i < g.num_elements(); ++i) {
          const double tol =
              static_cast<double>(oracle.count) * std::ldexp(oracle.magnitude[i], -24) +
              rounding * std::abs(oracle.sum[i]) + 1e-30;
          ASSERT_NEAR(g.GetDouble(i), oracle.sum[i], tol) << what << " element " << i;
        }
      }
    }
  }
}

TEST_P(ReduceTest, MaxAndMinAreBitExact) {
  for (const char* name : {"reduce_max", "reduce_min"}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (const Dims& dims : kShapes) {
        for (bool nans : {false, true}) {
          const Tensor x = Values(dtype, dims, /*sum=*/false, nans, rng_);
          for (const Dims& axes : AxisSubsets(static_cast<int64_t>(dims.size()))) {
            const ir::Op op = ReduceOp(name, x, axes);
            const std::string what = std::string(name) + " " + x.type().ToString() + " axes " +
                                     ::testing::PrintToString(axes);
            absl::StatusOr<std::vector<Tensor>> want = reference::EvaluateLocalOp(op, {x});
            ASSERT_TRUE(want.ok()) << want.status();
            absl::StatusOr<std::vector<Tensor>> got = Run(op, x);
            ASSERT_TRUE(got.ok()) << what << ": " << got.status();
            const Tensor& g = (*got)[0];
            const Tensor& w = (*want)[0];
            ASSERT_EQ(g.type(), w.type()) << what;
            ASSERT_EQ(std::memcmp(g.data(), w.data(), w.byte_size()), 0) << what;
          }
        }
      }
    }
  }
}

TEST_P(ReduceTest, IntegerAndPredInputsFallBack) {
  const Tensor s32 = Tensor::Zeros({DType::kS32, {4, 9}});
  for (const char* name : kOps) {
    EXPECT_TRUE(absl::IsUnimplemented(Run(ReduceOp(name, s32, {1}), s32).status())) << name;
  }
  const Tensor pred = Tensor::Zeros({DType::kPred, {4, 9}});
  for (const char* name : {"reduce_max", "reduce_min"}) {
    EXPECT_TRUE(absl::IsUnimplemented(Run(ReduceOp(name, pred, {0}), pred).status())) << name;
  }
}

TEST_P(ReduceTest, BadInputIsAnErrorNotACrash) {
  const Tensor x = Tensor::Zeros({DType::kF32, {4, 9}});
  ir::Op op;
  op.set_opcode("reduce_sum");
  op.mutable_reduce()->add_axes(2);  // out of range
  *op.add_result_types() = ir::ToProto(ir::ShapedType{DType::kF32, {4, 9}});
  EXPECT_TRUE(absl::IsInvalidArgument(Run(op, x).status()));
  ir::Op wrong_result = ReduceOp("reduce_max", x, {0});
  *wrong_result.mutable_result_types(0) = ir::ToProto(ir::ShapedType{DType::kF32, {4}});
  EXPECT_TRUE(absl::IsInvalidArgument(Run(wrong_result, x).status()));
}

INSTANTIATE_TEST_SUITE_P(Isa, ReduceTest, ::testing::ValuesIn(kAllIsaLevels), IsaLevelName);

}  // namespace
}  // namespace shardjit::backends::x86
