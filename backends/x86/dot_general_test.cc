// The x86 dot_general against the reference kernel over dimension numbers (batch dims, split
// free and contracting dims, empty and size-1 dims), dtypes (f64 on the f64 GEMM) and every ISA
// level of this host;
// s8 dots run on the int8 GEMM (VNNI, or the float GEMM on widened operands from AVX2 on), other
// integer dots fall back (UnimplementedError).
#include <random>

#include "backends/reference/kernel.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/dot_general.h"
#include "backends/x86/gemm.h"
#include "backends/x86/isa_test_util.h"
#include "base/thread_pool.h"
#include "gtest/gtest.h"
#include "ir/primitive.h"

namespace shardjit::backends::x86 {
namespace {

using Dims = std::vector<int64_t>;

struct DotCase {
  Dims lhs, rhs, lc, rc, lb, rb;
};

ir::Op DotOp(const DotCase& c, ir::DType in, ir::DType preferred) {
  ir::Op op;
  op.set_opcode("dot_general");
  auto* a = op.mutable_dot_general();
  for (int64_t d : c.lc) a->add_lhs_contracting_dims(d);
  for (int64_t d : c.rc) a->add_rhs_contracting_dims(d);
  for (int64_t d : c.lb) a->add_lhs_batch_dims(d);
  for (int64_t d : c.rb) a->add_rhs_batch_dims(d);
  a->set_preferred_element_type(ir::ToProto(preferred));
  ir::ShapeContext ctx;
  absl::StatusOr<std::vector<ir::ShapedType>> types =
      ir::InferResultTypes(ctx, {{in, c.lhs}, {in, c.rhs}}, op);
  EXPECT_TRUE(types.ok()) << types.status();
  *op.add_result_types() = ir::ToProto((*types)[0]);
  return op;
}

ir::Tensor Random(ir::DType dtype, const Dims& dims, int seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist;
  ir::Tensor t = ir::Tensor::Empty({dtype, dims});
  for (int64_t i = 0; i < t.num_elements(); ++i) t.SetDouble(i, dist(gen));
  return t;
}

class DotGeneralTest : public IsaLevelTest {};

TEST_P(DotGeneralTest, MatchesTheReferenceKernel) {
  const std::vector<DotCase> cases = {
      {{7, 13}, {13, 5}, {1}, {0}, {}, {}},                   // plain matmul, odd sizes
      {{13, 7}, {13, 5}, {0}, {0}, {}, {}},                   // lhs contracting dim first
      {{7, 13}, {5, 13}, {1}, {1}, {}, {}},                   // rhs transposed
      {{3, 9, 17}, {3, 17, 33}, {2}, {1}, {0}, {0}},          // batched
      {{9, 3, 17}, {17, 3, 4}, {2}, {0}, {1}, {1}},           // batch dim in the middle
      {{4, 6, 5}, {6, 5, 7}, {1, 2}, {0, 1}, {}, {}},         // two contracting dims
      {{2, 3, 64}, {64, 65}, {2}, {0}, {}, {}},               // two lhs free dims merge
      {{1, 1}, {1, 1}, {1}, {0}, {}, {}},
      {{130, 257}, {257, 129}, {1}, {0}, {}, {}},
      // Dimension numbers whose dims do not merge into one strided index: loops around the GEMM.
      {{4, 6, 5}, {6, 3}, {1}, {0}, {}, {}},                  // lhs free dims around k
      {{3, 7}, {5, 7, 2}, {1}, {1}, {}, {}},                  // rhs free dims around k
      {{6, 4, 5}, {5, 3, 6}, {0, 2}, {2, 0}, {}, {}},         // contracting dims in other orders
      {{5, 2, 3, 4}, {3, 5, 7}, {0, 2}, {1, 0}, {}, {}},      // split k with free dims between
      {{2, 3, 4, 5}, {5, 2, 4, 3}, {3, 1}, {0, 3}, {0}, {1}}, // batch + split contracting
      {{3, 1, 4}, {4, 1, 2}, {2, 1}, {0, 1}, {}, {}},         // size-1 contracting dim
      {{2, 0, 3}, {3, 4}, {2}, {0}, {}, {}},                  // empty result
      {{2, 3, 0}, {0, 4}, {2}, {0}, {}, {}},                  // k = 0: zeros
      {{4, 3}, {3}, {1}, {0}, {}, {}},                        // no rhs free dims
      {{3}, {3, 4}, {0}, {0}, {}, {}},                        // no lhs free dims
      {{5, 3}, {5, 3}, {0, 1}, {0, 1}, {}, {}},               // no free dims at all
  };
  base::ThreadPool pool(1);
  for (ir::DType in : {ir::DType::kF32, ir::DType::kBF16, ir::DType::kF16, ir::DType::kF64}) {
    for (ir::DType out : {ir::DType::kF32, ir::DType::kBF16, ir::DType::kF16, ir::DType::kF64}) {
      // Narrower than the operands (refused by the shape rule, as in jax.lax), or f16 with bf16;
      // f64 only with f64.
      if (ir::DTypeSize(out) < ir::DTypeSize(in)) continue;
      if ((in == ir::DType::kF16) != (out == ir::DType::kF16) && out != ir::DType::kF32) continue;
      if ((in == ir::DType::kF64) != (out == ir::DType::kF64)) continue;
      for (const DotCase& c : cases) {
        ir::Op op = DotOp(c, in, out);
        std::vector<ir::Tensor> operands = {Random(in, c.lhs, 1), Random(in, c.rhs, 2)};
        base::ScopedParallelism two_threads({&pool, 2});
        absl::StatusOr<std::vector<ir::Tensor>> got =
            DotGeneral(op, operands, ir::HostAllocator());
        ASSERT_TRUE(got.ok()) << got.status();
        absl::StatusOr<std::vector<ir::Tensor>> want =
            reference::EvaluateLocalOp(op, operands);
        ASSERT_TRUE(want.ok());
        const ir::Tensor& g = (*got)[0];
        const ir::Tensor& w = (*want)[0];
        ASSERT_EQ(g.type(), w.type());
        int64_t k = 1;
        for (int64_t d : c.lc) k *= c.lhs[d];
        // Both sum in f32 (f64 for f64, in different orders); bf16 results may then round
        // differently.
        double tol = out == ir::DType::kBF16  ? 1.0 / 64
                     : out == ir::DType::kF16 ? 1.0 / 512
                     : out == ir::DType::kF64 ? 1e-14 * std::sqrt(double(k))
                                              : 1e-5 * std::sqrt(double(k));
        for (int64_t i = 0; i < g.num_elements(); ++i) {
          ASSERT_NEAR(g.GetDouble(i), w.GetDouble(i), tol * (1 + std::abs(w.GetDouble(i))))
              << "element " << i;
        }
      }
    }
  }
}

ir::Tensor RandomInt8(const Dims& dims, int seed) {
  std::mt19937 gen(seed);
  ir::Tensor t = ir::Tensor::Empty({ir::DType::kS8, dims});
  auto* data = static_cast<int8_t*>(t.data());
  for (int64_t i = 0; i < t.num_elements(); ++i) data[i] = static_cast<int8_t>(gen());
  return t;
}

// s8 x s8 -> s32, s16 and s8 (wrapping) on the VNNI GEMM or, below it, the float GEMM on
// widened operands, equal to the reference's exact sums; at the plain C++ level the x86 kernel
// declines (the reference runs instead).
TEST_P(DotGeneralTest, Int8ProductsAreExact) {
  const std::vector<DotCase> cases = {
      {{7, 13}, {13, 5}, {1}, {0}, {}, {}},
      {{7, 13}, {5, 13}, {1}, {1}, {}, {}},
      {{3, 9, 17}, {3, 17, 33}, {2}, {1}, {0}, {0}},
      {{4, 6, 5}, {6, 5, 7}, {1, 2}, {0, 1}, {}, {}},
      {{5, 2, 3, 4}, {3, 5, 7}, {0, 2}, {1, 0}, {}, {}},
      {{130, 1031}, {1031, 67}, {1}, {0}, {}, {}},
      {{2, 3, 0}, {0, 4}, {2}, {0}, {}, {}},
  };
  base::ThreadPool pool(1);
  for (ir::DType out : {ir::DType::kS32, ir::DType::kS16, ir::DType::kS8}) {
    for (const DotCase& c : cases) {
      ir::Op op = DotOp(c, ir::DType::kS8, out);
      std::vector<ir::Tensor> operands = {RandomInt8(c.lhs, 1), RandomInt8(c.rhs, 2)};
      base::ScopedParallelism two_threads({&pool, 2});
      absl::StatusOr<std::vector<ir::Tensor>> got = DotGeneral(op, operands, ir::HostAllocator());
      if (!GemmRunsInt8()) {
        EXPECT_TRUE(absl::IsUnimplemented(got.status())) << got.status();
        continue;
      }
      ASSERT_TRUE(got.ok()) << got.status();
      absl::StatusOr<std::vector<ir::Tensor>> want = reference::EvaluateLocalOp(op, operands);
      ASSERT_TRUE(want.ok());
      ASSERT_EQ((*got)[0].type(), (*want)[0].type());
      for (int64_t i = 0; i < (*got)[0].num_elements(); ++i) {
        ASSERT_EQ((*got)[0].GetDouble(i), (*want)[0].GetDouble(i)) << "element " << i;
      }
    }
  }
}

// dot_accumulate of s8 operands into an s32 box at an offset.
TEST_P(DotGeneralTest, Int8AccumulatesIntoAnS32Box) {
  ir::Op op;
  op.set_opcode("dot_accumulate");
  auto* a = op.mutable_dot_general();
  a->add_lhs_contracting_dims(1);
  a->add_rhs_contracting_dims(0);
  a->set_preferred_element_type(ir::ToProto(ir::DType::kS32));
  const std::vector<ir::ShapedType> types = {{ir::DType::kS32, {9, 70}},
                                             {ir::DType::kS8, {6, 37}},
                                             {ir::DType::kS8, {37, 65}},
                                             {ir::DType::kS32, {}},
                                             {ir::DType::kS32, {}}};
  absl::StatusOr<std::vector<ir::ShapedType>> out = ir::InferResultTypes({}, types, op);
  ASSERT_TRUE(out.ok()) << out.status();
  *op.add_result_types() = ir::ToProto((*out)[0]);
  ir::Tensor acc = ir::Tensor::Empty(types[0]);
  for (int64_t i = 0; i < acc.num_elements(); ++i) acc.SetDouble(i, double(i % 1000) - 500);
  std::vector<ir::Tensor> operands = {
      acc, RandomInt8({6, 37}, 3), RandomInt8({37, 65}, 4),
      ir::Tensor::FromDoubles({ir::DType::kS32, {}}, {2}),
      ir::Tensor::FromDoubles({ir::DType::kS32, {}}, {3})};
  absl::StatusOr<std::vector<ir::Tensor>> got = DotAccumulate(op, operands, ir::HostAllocator());
  if (!GemmRunsInt8()) {
    EXPECT_TRUE(absl::IsUnimplemented(got.status())) << got.status();
    return;
  }
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<std::vector<ir::Tensor>> want = reference::EvaluateLocalOp(op, operands);
  ASSERT_TRUE(want.ok()) << want.status();
  for (int64_t i = 0; i < (*got)[0].num_elements(); ++i) {
    ASSERT_EQ((*got)[0].GetDouble(i), (*want)[0].GetDouble(i)) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, DotGeneralTest, ::testing::ValuesIn(kAllIsaLevels), IsaLevelName);

TEST(DotGeneralErrors, OperandsThatDoNotMatchTheOpAreRejected) {
  ir::Op op = DotOp({{4, 6}, {6, 3}, {1}, {0}, {}, {}}, ir::DType::kF32, ir::DType::kF32);
  // Contracting sizes differ (6 vs 5): an error naming dot_general, not a read past rhs.
  std::vector<ir::Tensor> operands = {Random(ir::DType::kF32, {4, 6}, 1),
                                      Random(ir::DType::kF32, {5, 3}, 2)};
  absl::Status s = DotGeneral(op, operands, ir::HostAllocator()).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("dot_general"), std::string::npos) << s;
  // One operand only.
  EXPECT_FALSE(DotGeneral(op, {operands[0]}, ir::HostAllocator()).ok());
}

TEST(DotGeneralFallback, IntegersAreUnimplemented) {
  ir::Op int_op = DotOp({{2, 3}, {3, 2}, {1}, {0}, {}, {}}, ir::DType::kS32, ir::DType::kS32);
  std::vector<ir::Tensor> ints = {ir::Tensor::Zeros({ir::DType::kS32, {2, 3}}),
                                  ir::Tensor::Zeros({ir::DType::kS32, {3, 2}})};
  EXPECT_TRUE(absl::IsUnimplemented(DotGeneral(int_op, ints, ir::HostAllocator()).status()));
}

}  // namespace
}  // namespace shardjit::backends::x86
