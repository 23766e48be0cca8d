// Cost analysis: hand-computed flops and bytes for small per-device modules.
#include "passes/cost_analysis.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace shardjit::passes {
namespace {

using ::testing::HasSubstr;

CostReport Analyze(const std::string& text, CostOptions options = {}) {
  absl::StatusOr<ir::Module> m = ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m);
  absl::StatusOr<CostReport> r = AnalyzeCost(*m, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : CostReport();
}

// The seed notebook's variant (c) on a 2x2 mesh at 2048x2048 @ 2048x1024 in bf16, per device.
constexpr char kSeedC[] =
    "module xla_matmul2 [view=per_device mesh={x:2,y:2} devices=(0,1,2,3) entry=main "
    "param_shardings=(P(x,y),P(x,None)) result_shardings=(P(x,None))]\n"
    "func main = { lambda ; a:bf16[1024,1024] b:bf16[1024,1024]. let\n"
    "    c:bf16[2048,1024] = all_gather[axes=(x) axis=0 tiled=True] b\n"
    "    d:s32[] = axis_index[axes=(y)]\n"
    "    e:s32[] = constant[dtype=s32 value=(1024)]\n"
    "    f:s32[] = mul d e\n"
    "    g:s32[] = constant[dtype=s32 value=(0)]\n"
    "    h:bf16[1024,1024] = dynamic_slice[slice_sizes=(1024,1024)] c f g\n"
    "    i:bf16[1024,1024] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
    "preferred_element_type=None] a h\n"
    "    j:bf16[1024,1024] = psum[axes=(y)] i\n"
    "  in (j) }\n";

TEST(CostAnalysisTest, SeedVariantC) {
  CostReport r = Analyze(kSeedC);
  // One [1024,1024] @ [1024,1024] dot; the s32 index arithmetic is free.
  EXPECT_EQ(r.flops, int64_t{2} * 1024 * 1024 * 1024);
  ASSERT_EQ(r.collectives.size(), 2u);
  // all_gather over 2 devices: half of the 4 MiB result arrives from the peer.
  EXPECT_EQ(r.collectives[0].op, "all_gather");
  EXPECT_EQ(r.collectives[0].axes, "(x)");
  EXPECT_EQ(r.collectives[0].group_size, 2);
  EXPECT_EQ(r.collectives[0].bytes_sent, 2048 * 1024 * 2 / 2);
  // Ring psum of 2 MiB over 2 devices: 2 * (1/2) * 2 MiB.
  EXPECT_EQ(r.collectives[1].op, "psum");
  EXPECT_EQ(r.collectives[1].axes, "(y)");
  EXPECT_EQ(r.collectives[1].operand, "bf16[1024,1024]");
  EXPECT_EQ(r.collectives[1].bytes_sent, 2 * (1024 * 1024 * 2) / 2);
  EXPECT_EQ(r.bytes_communicated, 4 << 20);
  EXPECT_EQ(r.ToString(),
            "flops: 2147483648\n"
            "bytes communicated: 4194304\n"
            "estimated time: 21704.6 us\n"
            "  all_gather[axes=(x)] bf16[1024,1024] n=2 x1: 2097152 bytes\n"
            "  psum[axes=(y)] bf16[1024,1024] n=2 x1: 2097152 bytes\n");
}

// The estimate is the machine model's: flops at its rate, bytes at its bandwidth, and a fixed
// cost per collective run.
TEST(CostAnalysisTest, EstimatedTimeFollowsTheMachineModel) {
  CostOptions options;
  options.machine = {.flops_per_second = 1e9, .bytes_per_second = 1e6,
                     .seconds_per_collective = 0.5};
  CostReport r = Analyze(kSeedC, options);
  EXPECT_DOUBLE_EQ(r.estimated_seconds, 2147483648 / 1e9 + (4 << 20) / 1e6 + 2 * 0.5);
}

// dot_accumulate's product (lhs, rhs: operands 1 and 2) may be smaller than its acc.
TEST(CostAnalysisTest, DotAccumulateCountsItsProductNotItsAcc) {
  CostReport r = Analyze(
      "module m [view=per_device mesh={x:2} devices=(0,1) entry=main param_shardings=(P(),P()) "
      "result_shardings=(P())]\n"
      "func main = { lambda ; a:f32[4,3] b:f32[3,5]. let\n"
      "    c:f32[8,16] = constant[dtype=f32 shape=(8,16) value=(0)]\n"
      "    d:s32[] = constant[dtype=s32 value=(0)]\n"
      "    e:f32[8,16] = dot_accumulate[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
      "preferred_element_type=f32] c a b d d\n"
      "  in (e) }\n");
  EXPECT_EQ(r.flops, 2 * 4 * 3 * 5);
}

TEST(CostAnalysisTest, ElementwiseReductionsScatterAndAllToAll) {
  CostReport r = Analyze(
      "module m [view=per_device mesh={x:4} devices=(0,1,2,3) entry=main param_shardings=(P()) "
      "result_shardings=(P(x),P())]\n"
      "func main = { lambda ; a:f32[8,16]. let\n"
      "    b:f32[8,16] = exp a\n"
      "    c:f32[8] = reduce_sum[axes=(1)] b\n"
      "    d:f32[2] = psum_scatter[axes=(x) scatter_dimension=0 tiled=True] c\n"
      "    e:f32[32,4] = all_to_all[axes=(x) split_axis=1 concat_axis=0 tiled=True] a\n"
      "  in (d, e) }\n");
  EXPECT_EQ(r.flops, 128 + 128);  // exp: one per element; reduce_sum: one per operand element
  ASSERT_EQ(r.collectives.size(), 2u);
  EXPECT_EQ(r.collectives[0].bytes_sent, 32 * 3 / 4);   // (n-1)/n of the f32[8] operand
  EXPECT_EQ(r.collectives[1].bytes_sent, 512 * 3 / 4);  // (n-1)/n of the f32[8,16] operand
  EXPECT_EQ(r.bytes_communicated, 24 + 384);
}

TEST(CostAnalysisTest, LoopBodiesCountOncePerTrip) {
  // A ring step per trip: 3 ppermutes of f32[8,4] and 3 adds of 32 elements.
  CostReport r = Analyze(
      "module m [view=per_device mesh={x:4} devices=(0,1,2,3) entry=main param_shardings=(P(x)) "
      "result_shardings=(P(x))]\n"
      "func main = { lambda ; a:f32[8,4]. let\n"
      "    e:f32[8,4] = fori_loop[lower=0 upper=3 body={ lambda ; b:s32[] c:f32[8,4]. let\n"
      "          d:f32[8,4] = ppermute[axes=(x) perm=((0,1),(1,2),(2,3),(3,0))] c\n"
      "          f:f32[8,4] = add d a\n"
      "        in (f) }] a\n"
      "  in (e) }\n");
  EXPECT_EQ(r.flops, 3 * 32);
  ASSERT_EQ(r.collectives.size(), 1u);
  EXPECT_EQ(r.collectives[0].count, 3);
  EXPECT_EQ(r.bytes_communicated, 3 * 128);
}

TEST(CostAnalysisTest, PpermuteCountsForSourcesOnly) {
  const std::string text =
      "module m [view=per_device mesh={x:2,y:2} devices=(0,1,2,3) entry=main "
      "param_shardings=(P()) result_shardings=(P())]\n"
      "func main = { lambda ; a:f32[4]. let\n"
      "    b:f32[4] = ppermute[axes=(y) perm=((0,1))] a\n"
      "  in (b) }\n";
  EXPECT_EQ(Analyze(text).bytes_communicated, 16);  // the busiest device
  EXPECT_EQ(Analyze(text, {.device = 2}).bytes_communicated, 16);  // (x=1, y=0): a source
  EXPECT_EQ(Analyze(text, {.device = 3}).bytes_communicated, 0);   // (x=1, y=1): a target only
}

TEST(CostAnalysisTest, ShardMapBodiesCountPerDevice) {
  CostReport r = Analyze(
      "module m [view=global mesh={x:2} devices=(0,1) entry=main]\n"
      "func main = { lambda ; a:f32[8,4]. let\n"
      "    d:f32[8,4] = shard_map[in_specs=(P(x)) out_specs=(P(x)) body={ lambda ; b:f32[4,4]. "
      "let\n"
      "          c:f32[4,4] = psum[axes=(x)] b\n"
      "        in (c) }] a\n"
      "  in (d) }\n");
  EXPECT_EQ(r.bytes_communicated, 64);  // 2 * (1/2) * 64 bytes
  EXPECT_EQ(r.flops, 0);
}

TEST(CostAnalysisTest, Errors) {
  absl::StatusOr<ir::Module> m = ir::ParseModule(kSeedC);
  ASSERT_TRUE(m.ok());
  absl::StatusOr<CostReport> r = AnalyzeCost(*m, {.device = 4});
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("device 4 is not a position"));
  m->set_entry("other");
  r = AnalyzeCost(*m);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("no entry function \"other\""));
}

}  // namespace
}  // namespace shardjit::passes
