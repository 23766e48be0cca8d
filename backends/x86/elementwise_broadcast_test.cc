// Fused loops whose inputs are broadcast along leading or trailing dimensions (a row's maximum,
// a mask shared by every batch), run by rows or, for short rows, over expanded inputs, against
// the reference fusion kernel at every ISA level this host runs; broadcasts rows cannot read are
// declined (the caller then runs the reference kernel).
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "backends/reference/kernel.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/elementwise.h"
#include "backends/x86/elementwise_test_util.h"
#include "backends/x86/isa_test_util.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "ir/fmt_absl.h"

namespace shardjit::backends::x86 {
namespace {

using ir::Tensor;

struct BroadcastCase {
  std::string name;
  std::string params;  // R and C stand for the sizes of a case
  std::string fusion;
};

const BroadcastCase kCases[] = {
    // Softmax: exp(x - max), the maximum one element per row.
    {"PerRow", "a:f32[3,5,C] b:f32[3,5]",
     "z:f32[3,5,C] = fusion[body={ lambda ; c:f32[3,5,C] d:f32[3,5]. let\n"
     "      e:f32[3,5,C] = broadcast_in_dim[shape=(3,5,C) broadcast_dimensions=(0,1)] d\n"
     "      f:f32[3,5,C] = sub c e\n"
     "      g:f32[3,5,C] = exp f\n"
     "    in (g) }] a b"},
    // A causal mask shared by both batches and all heads.
    {"PerColumn", "a:f32[2,3,R,C] m:f32[R,C]",
     "z:f32[2,3,R,C] = fusion[body={ lambda ; c:f32[2,3,R,C] d:f32[R,C]. let\n"
     "      e:f32[2,3,R,C] = broadcast_in_dim[shape=(2,3,R,C) broadcast_dimensions=(2,3)] d\n"
     "      f:f32[2,3,R,C] = add c e\n"
     "    in (f) }] a m"},
    // Both kinds in one loop (rows of the last dimension), bf16 and a pred per row.
    {"RowAndColumnSelect", "p:pred[R] x:bf16[R,C] y:bf16[C]",
     "z:bf16[R,C] = fusion[body={ lambda ; c:pred[R] d:bf16[R,C] e:bf16[C]. let\n"
     "      f:pred[R,C] = broadcast_in_dim[shape=(R,C) broadcast_dimensions=(0)] c\n"
     "      g:bf16[R,C] = broadcast_in_dim[shape=(R,C) broadcast_dimensions=(1)] e\n"
     "      h:bf16[R,C] = select f d g\n"
     "    in (h) }] p x y"},
    // RMSNorm's scale: a per-row factor times a per-column weight, f32 out of both.
    {"ScaleTimesWeight", "x:f32[R,C] s:f32[R] w:f32[C]",
     "z:f32[R,C] = fusion[body={ lambda ; c:f32[R,C] d:f32[R] e:f32[C]. let\n"
     "      f:f32[R,C] = broadcast_in_dim[shape=(R,C) broadcast_dimensions=(0)] d\n"
     "      g:f32[R,C] = broadcast_in_dim[shape=(R,C) broadcast_dimensions=(1)] e\n"
     "      h:f32[R,C] = mul c f\n"
     "      i:f32[R,C] = mul h g\n"
     "    in (i) }] x s w"},
    // One element broadcast from [1,1] (a scalar), s32.
    {"UnitOperandIsAScalar", "i:s32[1,1] j:s32[R,C]",
     "z:s32[R,C] = fusion[body={ lambda ; c:s32[1,1] d:s32[R,C]. let\n"
     "      e:s32[R,C] = broadcast_in_dim[shape=(R,C) broadcast_dimensions=(0,1)] c\n"
     "      f:s32[R,C] = add d e\n"
     "    in (f) }] i j"},
    // Unit dimensions added only: the operand read whole.
    {"UnitDimensionsAdded", "w:f32[2,C] a:f32[2,1,C]",
     "z:f32[2,1,C] = fusion[body={ lambda ; c:f32[2,C] d:f32[2,1,C]. let\n"
     "      e:f32[2,1,C] = broadcast_in_dim[shape=(2,1,C) broadcast_dimensions=(0,2)] c\n"
     "      f:f32[2,1,C] = mul d e\n"
     "    in (f) }] w a"},
};

ir::Op Sized(const BroadcastCase& c, int64_t rows, int64_t cols) {
  auto sized = [&](const std::string& s) {
    return absl::StrReplaceAll(s, {{"R", std::to_string(rows)}, {"C", std::to_string(cols)}});
  };
  return FusionOp(sized(c.params), sized(c.fusion), 0);
}

TEST(ElementwiseBroadcastTest, MatchesReferenceByRowsAndExpanded) {
  const reference::Kernel* oracle = reference::FindKernel("fusion");
  ASSERT_NE(oracle, nullptr);
  for (IsaLevel isa : HostIsaLevels()) {
    if (isa == IsaLevel::kReference) continue;
    ScopedMaxIsa cap(isa);
    for (const BroadcastCase& c : kCases) {
      // Rows of 1, 7 and 17 elements (expanded) and of 64, 100 and 1000 (one call each).
      for (int64_t cols : {1, 7, 17, 64, 100, 1000}) {
        const int64_t rows = cols < 64 ? 9 : 4;
        const std::string what = fmt::format("{} {}x{} isa={}", c.name, rows, cols, IsaName(isa));
        ir::Op op = Sized(c, rows, cols);
        std::vector<Tensor> operands = RandomOperands(op, static_cast<uint32_t>(cols));
        absl::StatusOr<std::vector<Tensor>> want = (*oracle)(op, operands, ir::HostAllocator());
        ASSERT_TRUE(want.ok()) << what << ": " << want.status();
        const ElementwiseStats before = GetElementwiseStats();
        absl::StatusOr<std::vector<Tensor>> got = FusionKernel(op, operands, ir::HostAllocator());
        ASSERT_TRUE(got.ok()) << what << ": " << got.status();
        EXPECT_EQ(GetElementwiseStats().runs, before.runs + 1) << what;
        const int64_t n = (*want)[0].num_elements();
        ExpectClose((*got)[0], (*want)[0], c.name == "PerRow" ? 1 : 0, what,
                    OpenNanLanes(NanRule::kOpen, operands, n));
      }
    }
  }
}

TEST(ElementwiseBroadcastTest, DeclinesBroadcastsRowsCannotRead) {
  if (DetectedIsa() < IsaLevel::kAvx2) GTEST_SKIP() << "no AVX2";
  const std::pair<BroadcastCase, std::string> kDeclined[] = {
      {{"Middle", "a:f32[2,4,8] b:f32[4]",
        "z:f32[2,4,8] = fusion[body={ lambda ; c:f32[2,4,8] d:f32[4]. let\n"
        "      e:f32[2,4,8] = broadcast_in_dim[shape=(2,4,8) broadcast_dimensions=(1)] d\n"
        "      f:f32[2,4,8] = mul c e\n"
        "    in (f) }] a b"},
       "a broadcast that is not read by rows"},
      {{"DifferentRows", "a:f32[2,4,8] b:f32[2,4] m:f32[4,8]",
        "z:f32[2,4,8] = fusion[body={ lambda ; c:f32[2,4,8] d:f32[2,4] e:f32[4,8]. let\n"
        "      f:f32[2,4,8] = broadcast_in_dim[shape=(2,4,8) broadcast_dimensions=(0,1)] d\n"
        "      g:f32[2,4,8] = broadcast_in_dim[shape=(2,4,8) broadcast_dimensions=(1,2)] e\n"
        "      h:f32[2,4,8] = sub c f\n"
        "      i:f32[2,4,8] = add h g\n"
        "    in (i) }] a b m"},
       "broadcasts of different rows"},
  };
  for (const auto& [c, message] : kDeclined) {
    ir::Op op = Sized(c, 0, 0);
    const ElementwiseStats before = GetElementwiseStats();
    absl::StatusOr<std::vector<Tensor>> got = FusionKernel(op, RandomOperands(op, 1), nullptr);
    ASSERT_TRUE(absl::IsUnimplemented(got.status())) << c.name << ": " << got.status();
    EXPECT_NE(got.status().message().find(message), std::string::npos) << got.status();
    EXPECT_EQ(GetElementwiseStats().fallbacks, before.fallbacks + 1) << c.name;
  }
}

}  // namespace
}  // namespace shardjit::backends::x86
