// Generated fused elementwise loops against the reference fusion kernel: over sizes around the
// 8-lane block, f32 and bf16, scalar operands, at ISA levels reference and avx2; declined bodies
// fall back (Unimplemented, counted) and never give a wrong answer.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "backends/reference/kernel.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/elementwise.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "ir/fmt_absl.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace shardjit::backends::x86 {
namespace {

using ir::DType;
using ir::Tensor;

const int64_t kSizes[] = {0, 1, 7, 8, 9, 1023, 4097};

// The fusion op of a module whose entry is `params` -> fusion; `N` in the text is the size.
ir::Op FusionOp(const std::string& params, const std::string& fusion_line, int64_t n) {
  std::string text = absl::StrReplaceAll(
      "module m [view=per_device mesh={x:1} devices=(0) entry=main]\n"
      "func main = { lambda ; " + params + ". let\n    " + fusion_line + "\n  in (z) }\n",
      {{"N", std::to_string(n)}});
  absl::StatusOr<ir::Module> m = ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status() << "\n" << text;
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m);
  return m->functions(0).body().ops(0);
}

// Random values with the awkward ones mixed in: zeros of both signs, NaN, infinities.
Tensor RandomTensor(const ir::ShapedType& type, int seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 3.0);
  const double specials[] = {0.0, -0.0, std::nan(""), INFINITY, -INFINITY, 1e-40};
  std::vector<double> values(type.num_elements());
  for (double& v : values) {
    v = rng() % 17 == 0 ? specials[rng() % 6] : normal(rng);
  }
  return Tensor::FromDoubles(type, values);
}

std::vector<Tensor> Operands(const ir::Op& op, int seed) {
  std::vector<Tensor> out;
  for (const ir::Param& p : op.fusion().body().params()) {
    out.push_back(RandomTensor(ir::FromProto(p.type()), seed++));
  }
  return out;
}

void ExpectBitwiseEqual(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.type(), want.type()) << what;
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.byte_size()), 0) << what;
  if (std::memcmp(got.data(), want.data(), want.byte_size()) == 0) return;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    if (got.GetDouble(i) != want.GetDouble(i)) {
      ADD_FAILURE() << what << ": first difference at " << i << ": " << got.GetDouble(i)
                    << " vs " << want.GetDouble(i);
      return;
    }
  }
}

struct FusionCase {
  std::string name;
  std::string params;
  std::string fusion;  // one line defining z
  bool generated;      // whether the avx2 generator supports it
};

std::vector<FusionCase> Cases() {
  return {
      {"MlpTailF32ToBf16", "a:f32[N] b:f32[N] c:f32[N] d:f32[]",
       "z:bf16[N] = fusion[body={ lambda ; e:f32[N] f:f32[N] g:f32[N] h:f32[]. let "
       "i:f32[N] = mul e f j:f32[N] = add i g k:f32[N] = broadcast_in_dim[shape=(N)] h "
       "l:f32[N] = max j k m:bf16[N] = convert_element_type[new_dtype=bf16] l in (m) }] a b c d",
       true},
      {"Bf16Arithmetic", "a:bf16[N] b:bf16[N] s:bf16[]",
       "z:bf16[N] = fusion[body={ lambda ; c:bf16[N] d:bf16[N] t:bf16[]. let "
       "e:bf16[N] = add c d f:bf16[N] = abs e g:bf16[N] = sqrt f h:bf16[N] = neg c "
       "i:bf16[N] = div h g u:bf16[N] = broadcast_in_dim[shape=(N)] t j:bf16[N] = min i u "
       "k:bf16[N] = sub j d in (k) }] a b s",
       true},
      {"Bf16ToF32AndRsqrt", "a:bf16[N] b:f32[N]",
       "z:f32[N] = fusion[body={ lambda ; c:bf16[N] d:f32[N]. let "
       "e:f32[N] = convert_element_type[new_dtype=f32] c f:f32[N] = max d e "
       "g:f32[N] = rsqrt f h:f32[N] = mul g g in (h) }] a b",
       true},
      {"DeclinedExp", "a:f32[N] b:f32[N]",
       "z:f32[N] = fusion[body={ lambda ; c:f32[N] d:f32[N]. let "
       "e:f32[N] = exp c f:f32[N] = add e d in (f) }] a b",
       false},
      {"DeclinedSelect", "a:f32[N] b:f32[N]",
       "z:f32[N] = fusion[body={ lambda ; c:f32[N] d:f32[N]. let "
       "e:pred[N] = compare[direction=LT] c d f:f32[N] = select e c d in (f) }] a b",
       false},
  };
}

class ElementwiseTest : public ::testing::TestWithParam<FusionCase> {
 protected:
  void TearDown() override { SetMaxIsa(IsaLevel::kAvx512Bf16); }
};

TEST_P(ElementwiseTest, MatchesReferenceAtEveryIsa) {
  const FusionCase& c = GetParam();
  const reference::Kernel* oracle = reference::FindKernel("fusion");
  ASSERT_NE(oracle, nullptr);
  for (IsaLevel isa : {IsaLevel::kReference, IsaLevel::kAvx2}) {
    if (isa > DetectedIsa()) continue;
    SetMaxIsa(isa);
    for (int64_t n : kSizes) {
      const std::string what = fmt::format("{} n={} isa={}", c.name, n, IsaName(isa));
      ir::Op op = FusionOp(c.params, c.fusion, n);
      std::vector<Tensor> operands = Operands(op, static_cast<int>(n));
      absl::StatusOr<std::vector<Tensor>> want = (*oracle)(op, operands, ir::HostAllocator());
      ASSERT_TRUE(want.ok()) << want.status();
      const ElementwiseStats before = GetElementwiseStats();
      absl::StatusOr<std::vector<Tensor>> got = FusionKernel(op, operands, ir::HostAllocator());
      const ElementwiseStats after = GetElementwiseStats();
      if (isa == IsaLevel::kReference || !c.generated) {
        ASSERT_TRUE(absl::IsUnimplemented(got.status())) << what << ": " << got.status();
        EXPECT_EQ(after.fallbacks, before.fallbacks + 1) << what;
        continue;
      }
      ASSERT_TRUE(got.ok()) << what << ": " << got.status();
      EXPECT_EQ(after.runs, before.runs + 1) << what;
      ExpectBitwiseEqual((*got)[0], (*want)[0], what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fusions, ElementwiseTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(ElementwiseTest, DeclineNamesTheOp) {
  if (DetectedIsa() < IsaLevel::kAvx2) GTEST_SKIP() << "no AVX2";
  ir::Op op = FusionOp("a:f32[N] b:f32[N]",
                       "z:f32[N] = fusion[body={ lambda ; c:f32[N] d:f32[N]. let "
                       "e:f32[N] = tanh c f:f32[N] = add e d in (f) }] a b",
                       16);
  absl::StatusOr<std::vector<Tensor>> got = FusionKernel(op, Operands(op, 1), nullptr);
  ASSERT_TRUE(absl::IsUnimplemented(got.status()));
  EXPECT_NE(got.status().message().find("tanh is not supported"), std::string::npos)
      << got.status();
}

TEST(ReduceBuffersTest, MatchesAPlainLoop) {
  for (IsaLevel isa : {IsaLevel::kReference, IsaLevel::kAvx2}) {
    if (isa > DetectedIsa()) continue;
    SetMaxIsa(isa);
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (int64_t n : kSizes) {
        Tensor a = RandomTensor({dtype, {n}}, 3), b = RandomTensor({dtype, {n}}, 4);
        for (ReduceKind kind : {ReduceKind::kSum, ReduceKind::kMax, ReduceKind::kMin}) {
          const char* opcode = kind == ReduceKind::kSum   ? "add"
                               : kind == ReduceKind::kMax ? "max"
                                                          : "min";
          ir::Op op;
          op.set_opcode(opcode);
          *op.add_result_types() = ir::ToProto(a.type());
          Tensor want = (*(*reference::FindKernel(opcode))(op, {a, b}, nullptr))[0];
          Tensor got = Tensor::Empty(a.type());
          ASSERT_TRUE(ReduceBuffers(kind, dtype, a.data(), b.data(), got.data(), n).ok());
          ExpectBitwiseEqual(got, want,
                             fmt::format("{} {} n={} isa={}", opcode, ir::DTypeName(dtype), n,
                                         IsaName(isa)));
        }
      }
    }
  }
  SetMaxIsa(IsaLevel::kAvx512Bf16);
}

}  // namespace
}  // namespace shardjit::backends::x86
