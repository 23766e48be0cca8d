// dot_accumulate (acc with a box increased by dot_general(lhs, rhs)) on the x86 GEMM and in the
// reference kernel, against an f64 oracle computed here: odd sizes, boxes at offsets (clamped as
// dynamic_update_slice clamps), transposed and split contracting dims, f32 and bf16 operands and
// accumulators, at every ISA level of this host; a donated accumulator is updated in place, a
// shared one is not touched.
#include <cmath>
#include <random>

#include "backends/reference/kernel.h"
#include "backends/x86/dot_general.h"
#include "backends/x86/isa_test_util.h"
#include "base/thread_pool.h"
#include "gtest/gtest.h"
#include "ir/primitive.h"

namespace shardjit::backends::x86 {
namespace {

using Dims = std::vector<int64_t>;

struct Case {
  Dims acc, lhs, rhs, lc, rc;
  Dims starts;  // may ask for more than fits: clamped
};

ir::Op AccOp(const Case& c, ir::DType in, ir::DType acc) {
  ir::Op op;
  op.set_opcode("dot_accumulate");
  auto* a = op.mutable_dot_general();
  for (int64_t d : c.lc) a->add_lhs_contracting_dims(d);
  for (int64_t d : c.rc) a->add_rhs_contracting_dims(d);
  a->set_preferred_element_type(ir::ToProto(acc));
  std::vector<ir::ShapedType> types = {{acc, c.acc}, {in, c.lhs}, {in, c.rhs}};
  for (size_t i = 0; i < c.acc.size(); ++i) types.push_back({ir::DType::kS32, {}});
  absl::StatusOr<std::vector<ir::ShapedType>> out = ir::InferResultTypes({}, types, op);
  EXPECT_TRUE(out.ok()) << out.status();
  *op.add_result_types() = ir::ToProto((*out)[0]);
  return op;
}

ir::Tensor Random(ir::DType dtype, const Dims& dims, int seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist;
  ir::Tensor t = ir::Tensor::Empty({dtype, dims});
  for (int64_t i = 0; i < t.num_elements(); ++i) t.SetDouble(i, dist(gen));
  return t;
}

std::vector<ir::Tensor> Operands(const Case& c, ir::DType in, ir::DType acc) {
  std::vector<ir::Tensor> ops = {Random(acc, c.acc, 3), Random(in, c.lhs, 1), Random(in, c.rhs, 2)};
  for (int64_t s : c.starts) {
    ops.push_back(ir::Tensor::FromDoubles({ir::DType::kS32, {}}, {static_cast<double>(s)}));
  }
  return ops;
}

// acc + lhs.rhs in f64, for rank-2 operands with one contracting dim each.
std::vector<double> Oracle(const Case& c, const std::vector<ir::Tensor>& ops) {
  const ir::Tensor& lhs = ops[1];
  const ir::Tensor& rhs = ops[2];
  const int64_t m = c.lhs[1 - c.lc[0]], k = c.lhs[c.lc[0]], n = c.rhs[1 - c.rc[0]];
  std::vector<double> out = ops[0].ToDoubles();
  const int64_t r0 = std::clamp<int64_t>(c.starts[0], 0, c.acc[0] - m);
  const int64_t c0 = std::clamp<int64_t>(c.starts[1], 0, c.acc[1] - n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t l = 0; l < k; ++l) {
        const double a = lhs.GetDouble(c.lc[0] == 1 ? i * k + l : l * m + i);
        const double b = rhs.GetDouble(c.rc[0] == 0 ? l * n + j : j * k + l);
        sum += a * b;
      }
      out[(r0 + i) * c.acc[1] + c0 + j] += sum;
    }
  }
  return out;
}

const std::vector<Case>& Cases() {
  static const auto* cases = new std::vector<Case>{
      {{7, 5}, {7, 13}, {13, 5}, {1}, {0}, {0, 0}},        // the whole acc
      {{21, 9}, {7, 13}, {13, 5}, {1}, {0}, {7, 3}},       // a box inside
      {{21, 9}, {7, 13}, {13, 5}, {1}, {0}, {100, -4}},    // clamped to (14, 0)
      {{16, 130}, {13, 7}, {129, 13}, {0}, {1}, {5, 1}},   // lhs contracting first, rhs transposed
      {{67, 40}, {33, 70}, {70, 33}, {1}, {0}, {17, 7}},   // several GEMM tiles
  };
  return *cases;
}

class DotAccumulateTest : public IsaLevelTest {};

TEST_P(DotAccumulateTest, AddsTheProductIntoTheBox) {
  base::ThreadPool pool(1);
  for (ir::DType in : {ir::DType::kF32, ir::DType::kBF16}) {
    for (ir::DType acc : {ir::DType::kF32, ir::DType::kBF16}) {
      // f32 -> bf16 is narrower than the operands: refused by the shape rule, as in jax.lax.
      if (in == ir::DType::kF32 && acc == ir::DType::kBF16) continue;
      for (const Case& c : Cases()) {
        const ir::ShapedType acc_type{acc, c.acc};
        SCOPED_TRACE(::testing::Message() << ir::DTypeName(in) << "->" << ir::DTypeName(acc)
                                          << " acc " << acc_type.ToString());
        ir::Op op = AccOp(c, in, acc);
        std::vector<ir::Tensor> operands = Operands(c, in, acc);
        const std::vector<double> want = Oracle(c, operands);
        // The reference first: the x86 kernel may update the (unshared) acc in place.
        absl::StatusOr<std::vector<ir::Tensor>> ref = reference::EvaluateLocalOp(op, operands);
        ASSERT_TRUE(ref.ok()) << ref.status();
        base::ScopedParallelism two_threads({&pool, 2});
        absl::StatusOr<std::vector<ir::Tensor>> got =
            DotAccumulate(op, operands, ir::HostAllocator());
        ASSERT_TRUE(got.ok()) << got.status();
        const int64_t k = c.lhs[c.lc[0]];
        const double tol = acc == ir::DType::kBF16 ? 1.0 / 64 : 1e-5 * std::sqrt(double(k));
        for (const ir::Tensor* t : {&(*got)[0], &(*ref)[0]}) {
          ASSERT_EQ(t->type(), acc_type);
          for (int64_t i = 0; i < t->num_elements(); ++i) {
            ASSERT_NEAR(t->GetDouble(i), want[i], tol * (1 + std::abs(want[i])))
                << "element " << i << (t == &(*got)[0] ? " (x86)" : " (reference)");
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, DotAccumulateTest, ::testing::ValuesIn(kAllIsaLevels),
                         IsaLevelName);

TEST(DotAccumulate, UpdatesADonatedAccumulatorInPlaceAndLeavesASharedOneAlone) {
  const Case c = Cases()[1];
  ir::Op op = AccOp(c, ir::DType::kF32, ir::DType::kF32);
  std::vector<ir::Tensor> operands = Operands(c, ir::DType::kF32, ir::DType::kF32);
  const std::vector<double> before = operands[0].ToDoubles();
  // Shared: the caller still holds acc, so the result is a new buffer.
  ir::Tensor held = operands[0];
  absl::StatusOr<std::vector<ir::Tensor>> shared = DotAccumulate(op, operands, ir::HostAllocator());
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_FALSE((*shared)[0].SharesStorageWith(held));
  EXPECT_EQ(held.ToDoubles(), before);
  // Donated: nothing else holds acc, so the GEMM writes into it.
  held = ir::Tensor();
  const void* storage = operands[0].data();
  absl::StatusOr<std::vector<ir::Tensor>> donated =
      DotAccumulate(op, operands, ir::HostAllocator());
  ASSERT_TRUE(donated.ok()) << donated.status();
  EXPECT_EQ((*donated)[0].data(), storage);
  EXPECT_EQ((*donated)[0].ToDoubles(), (*shared)[0].ToDoubles());
}

TEST(DotAccumulate, DeclinesWhatTheGemmCannotDoAndTheReferenceDoes) {
  // Two contracting dims that do not merge, into a bf16 acc: the x86 kernel declines.
  ir::Op op;
  op.set_opcode("dot_accumulate");
  auto* a = op.mutable_dot_general();
  a->add_lhs_contracting_dims(0);
  a->add_lhs_contracting_dims(2);
  a->add_rhs_contracting_dims(2);
  a->add_rhs_contracting_dims(0);
  a->set_preferred_element_type(ir::BF16);
  *op.add_result_types() = ir::ToProto({ir::DType::kBF16, {4, 3}});
  std::vector<ir::Tensor> operands = {
      Random(ir::DType::kBF16, {4, 3}, 1), Random(ir::DType::kBF16, {6, 4, 5}, 2),
      Random(ir::DType::kBF16, {5, 3, 6}, 3),
      ir::Tensor::FromDoubles({ir::DType::kS32, {}}, {0}),
      ir::Tensor::FromDoubles({ir::DType::kS32, {}}, {0})};
  const std::vector<double> before = operands[0].ToDoubles();
  EXPECT_TRUE(absl::IsUnimplemented(DotAccumulate(op, operands, ir::HostAllocator()).status()));
  EXPECT_EQ(operands[0].ToDoubles(), before);
  absl::StatusOr<std::vector<ir::Tensor>> ref = reference::EvaluateLocalOp(op, operands);
  ASSERT_TRUE(ref.ok()) << ref.status();
  // Element (0,0) by hand: acc + sum over l, k of lhs[l,0,k] * rhs[k,0,l].
  double sum = before[0];
  for (int l = 0; l < 6; ++l) {
    for (int k = 0; k < 5; ++k) {
      sum += operands[1].GetDouble(l * 20 + k) * operands[2].GetDouble(k * 18 + l);
    }
  }
  EXPECT_NEAR((*ref)[0].GetDouble(0), sum, 1.0 / 64 * (1 + std::abs(sum)));
}

TEST(DotAccumulate, ShapeRuleErrorsNameTheOp) {
  ir::Op op = AccOp(Cases()[0], ir::DType::kF32, ir::DType::kF32);
  // acc of another dtype than the product.
  absl::StatusOr<std::vector<ir::ShapedType>> bad = ir::InferResultTypes(
      {}, {{ir::DType::kBF16, {7, 5}}, {ir::DType::kF32, {7, 13}}, {ir::DType::kF32, {13, 5}},
           {ir::DType::kS32, {}}, {ir::DType::kS32, {}}},
      op);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("dot_accumulate: the product is f32 but acc is bf16"),
            std::string::npos)
      << bad.status();
  // A product that does not fit.
  bad = ir::InferResultTypes({}, {{ir::DType::kF32, {6, 5}}, {ir::DType::kF32, {7, 13}},
                                  {ir::DType::kF32, {13, 5}}, {ir::DType::kS32, {}},
                                  {ir::DType::kS32, {}}},
                             op);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not fit in acc along dim 0"), std::string::npos);
  // Missing start indices.
  bad = ir::InferResultTypes(
      {}, {{ir::DType::kF32, {7, 5}}, {ir::DType::kF32, {7, 13}}, {ir::DType::kF32, {13, 5}}},
      op);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("2 start indices"), std::string::npos);
}

}  // namespace
}  // namespace shardjit::backends::x86
