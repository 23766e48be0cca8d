// Generated fused elementwise loops against the reference fusion kernel: the bodies of
// elementwise_test_cases.h over lengths around the vector widths, at every ISA level this host
// runs. Bit identical (NaN payloads as NanRule allows), except transcendentals within their ulp
// bounds; declined bodies fall back (Unimplemented, counted) and never give a wrong answer.
#include "backends/x86/elementwise.h"

#include <string>
#include <vector>

#include "backends/reference/kernel.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/elementwise_kernel.h"
#include "backends/x86/elementwise_test_cases.h"
#include "backends/x86/elementwise_test_util.h"
#include "backends/x86/isa_test_util.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "ir/fmt_absl.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

using ir::DType;
using ir::Tensor;

class ElementwiseTest : public ::testing::TestWithParam<FusionCase> {};

// Whether a float operand holds a finite value of magnitude above `max_argument`.
bool BeyondArgument(const std::vector<Tensor>& operands, float max_argument) {
  for (const Tensor& t : operands) {
    if (t.dtype() != DType::kF32 && t.dtype() != DType::kBF16) continue;
    for (double v : t.ToDoubles()) {
      if (std::isfinite(v) && std::abs(v) > max_argument) return true;
    }
  }
  return false;
}

TEST_P(ElementwiseTest, MatchesReferenceAtEveryIsa) {
  const FusionCase& c = GetParam();
  const reference::Kernel* oracle = reference::FindKernel("fusion");
  ASSERT_NE(oracle, nullptr);
  for (IsaLevel isa : HostIsaLevels()) {
    ScopedMaxIsa cap(isa);
    for (int64_t n : kLengths) {
      const std::string what = fmt::format("{} n={} isa={}", c.name, n, IsaName(isa));
      ir::Op op = FusionOp(c.params, c.fusion, n);
      std::vector<Tensor> operands = RandomOperands(op, static_cast<uint32_t>(n));
      absl::StatusOr<std::vector<Tensor>> want = (*oracle)(op, operands, ir::HostAllocator());
      ASSERT_TRUE(want.ok()) << what << ": " << want.status();
      const ElementwiseStats before = GetElementwiseStats();
      absl::StatusOr<std::vector<Tensor>> got = FusionKernel(op, operands, ir::HostAllocator());
      const ElementwiseStats after = GetElementwiseStats();
      if (isa == IsaLevel::kReference || !c.generated || BeyondArgument(operands, c.max_argument)) {
        ASSERT_TRUE(absl::IsUnimplemented(got.status())) << what << ": " << got.status();
        EXPECT_EQ(after.fallbacks, before.fallbacks + 1) << what;
        continue;
      }
      ASSERT_TRUE(got.ok()) << what << ": " << got.status();
      EXPECT_EQ(after.runs, before.runs + 1) << what;
      const bool bf16 = (*want)[0].dtype() == DType::kBF16;
      ExpectClose((*got)[0], (*want)[0], c.max_ulp > 0 && bf16 ? 1 : c.max_ulp, what,
                  OpenNanLanes(c.nans, operands, n));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, ElementwiseTest, ::testing::ValuesIn(OpCases()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Bodies, ElementwiseTest, ::testing::ValuesIn(BodyCases()),
                         [](const auto& info) { return info.param.name; });

TEST(ElementwiseDeclineTest, NamesTheOpAndDtype) {
  if (DetectedIsa() < IsaLevel::kAvx2) GTEST_SKIP() << "no AVX2";
  const std::pair<FusionCase, std::string> kCases[] = {
      {OneOp("rem", "rem", {DType::kF32, DType::kF32}, DType::kF32), "rem is not supported"},
      {OneOp("div", "div", {DType::kS32, DType::kS32}, DType::kS32), "div on s32 is not supported"},
  };
  for (const auto& [c, message] : kCases) {
    ir::Op op = FusionOp(c.params, c.fusion, 16);
    absl::StatusOr<std::vector<Tensor>> got = FusionKernel(op, RandomOperands(op, 1), nullptr);
    ASSERT_TRUE(absl::IsUnimplemented(got.status())) << c.name;
    EXPECT_NE(got.status().message().find(message), std::string::npos) << got.status();
  }
}

TEST(ReduceBuffersTest, MatchesTheReferenceOps) {
  for (IsaLevel isa : HostIsaLevels()) {
    ScopedMaxIsa cap(isa);
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (int64_t n : kLengths) {
        Tensor a = RandomTensor({dtype, {n}}, 3), b = RandomTensor({dtype, {n}}, 4);
        for (ReduceKind kind : {ReduceKind::kSum, ReduceKind::kMax, ReduceKind::kMin}) {
          const char* opcode = kind == ReduceKind::kSum   ? "add"
                               : kind == ReduceKind::kMax ? "max"
                                                          : "min";
          ir::Op op;
          op.set_opcode(opcode);
          *op.add_result_types() = ir::ToProto(a.type());
          Tensor want = (*(*reference::FindKernel(opcode))(op, {a, b}, nullptr))[0];
          const std::string what =
              fmt::format("{} {} n={} isa={}", opcode, ir::DTypeName(dtype), n, IsaName(isa));
          Tensor got = Tensor::Empty(a.type());
          ASSERT_TRUE(ReduceBuffers(kind, dtype, a.data(), b.data(), got.data(), n).ok());
          const std::vector<bool> open_nan = OpenNanLanes(
              kind == ReduceKind::kSum ? NanRule::kOpenWhereTwoNans : NanRule::kExact, {a, b}, n);
          ExpectClose(got, want, 0, what, open_nan);
          // In place, as the collective fabric accumulates: out aliases b.
          Tensor acc = b.Copy();
          ASSERT_TRUE(ReduceBuffers(kind, dtype, a.data(), acc.data(), acc.data(), n).ok());
          ExpectClose(acc, want, 0, what + " in place", open_nan);
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardjit::backends::x86
