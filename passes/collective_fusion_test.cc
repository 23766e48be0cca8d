// collective-fusion: per-device IR text in, IR text out, for every rewrite and for the programs
// it must leave alone. (The numbers of fused programs are checked end to end against the unfused
// ones in tests/collective_fusion_test.cc.)
#include "passes/collective_fusion.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace shardjit::passes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Module(const std::string& mesh, const std::string& devices, const std::string& specs,
                   const std::string& params, const std::string& body,
                   const std::string& result) {
  return "module m [view=per_device mesh={" + mesh + "} devices=(" + devices +
         ") entry=main param_shardings=(" + specs + ") result_shardings=()]\n" +
         "func main = { lambda ; " + params + ". let\n" + body + "  in (" + result + ") }\n";
}

// Runs the pass on `text`; returns the printed module, or "(unchanged)" when Run says so.
std::string Fused(const std::string& text, CollectiveFusionOptions options = {}) {
  absl::StatusOr<ir::Module> m = ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status() << "\n" << text;
  if (!m.ok()) return "";
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m) << "\n" << text;
  const std::string before = ir::PrintModule(*m);
  absl::StatusOr<bool> changed = CollectiveFusion(options).Run(*m);
  EXPECT_TRUE(changed.ok()) << changed.status();
  if (!changed.ok()) return "";
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m) << "\n" << ir::PrintModule(*m);
  if (!*changed) {
    EXPECT_EQ(ir::PrintModule(*m), before);
    return "(unchanged)";
  }
  return ir::PrintModule(*m);
}

CollectiveFusionOptions Always() {
  CollectiveFusionOptions o;
  o.ignore_time_model = true;
  return o;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const char kGatherRows[] =
    "    c:f32[8,5] = all_gather[axes=(i) axis=0 tiled=True] a\n"
    "    d:f32[8,3] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
    "preferred_element_type=f32] c b\n";

TEST(CollectiveFusionTest, GatheredRowsBecomeAUnidirectionalRingOnTwoDevices) {
  EXPECT_EQ(Fused(Module("i:2", "0,1", "P(i),P()", "a:f32[4,5] b:f32[5,3]", kGatherRows, "d"),
                  Always()),
            Module("i:2", "0,1", "P(i),P()", "a:f32[4,5] b:f32[5,3]",
                   "    c:s32[] = axis_index[axes=(i)]\n"
                   "    d:f32[8,3] = constant[dtype=f32 shape=(8,3) value=(0)]\n"
                   "    e:s32[] = constant[dtype=s32 value=(0)]\n"
                   "    f:future[f32[4,5]] = ppermute_start[axes=(i) perm=((0,1),(1,0))] a\n"
                   "    g:s32[] = constant[dtype=s32 value=(4)]\n"
                   "    h:s32[] = mul c g\n"
                   "    i:f32[8,3] = dot_accumulate[lhs_contracting_dims=(1) "
                   "rhs_contracting_dims=(0) preferred_element_type=f32] d a b h e\n"
                   "    j:f32[4,5] = ppermute_done f\n"
                   "    k:s32[] = constant[dtype=s32 value=(1)]\n"
                   "    l:s32[] = add c k\n"
                   "    m:s32[] = constant[dtype=s32 value=(2)]\n"
                   "    n:s32[] = rem l m\n"
                   "    o:s32[] = mul n g\n"
                   "    p:f32[8,3] = dot_accumulate[lhs_contracting_dims=(1) "
                   "rhs_contracting_dims=(0) preferred_element_type=f32] i j b o e\n",
                   "p"));
}

TEST(CollectiveFusionTest, RingsInsideBranches) {
  // The gathered product inside a cond branch becomes the ring there; the other branch is kept.
  const std::string body =
      "    p:s32[] = axis_index[axes=(i)]\n"
      "    r:f32[8,3] = cond[branches=({ lambda ; x:f32[4,5] y:f32[5,3]. let\n"
      "          z:f32[8,3] = constant[dtype=f32 shape=(8,3) value=(0)]\n"
      "        in (z) },{ lambda ; u:f32[4,5] v:f32[5,3]. let\n"
      "          c:f32[8,5] = all_gather[axes=(i) axis=0 tiled=True] u\n"
      "          d:f32[8,3] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
      "preferred_element_type=f32] c v\n"
      "        in (d) })] p a b\n";
  const std::string out =
      Fused(Module("i:2", "0,1", "P(i),P()", "a:f32[4,5] b:f32[5,3]", body, "r"), Always());
  EXPECT_EQ(Count(out, "ppermute_start"), 1) << out;
  EXPECT_EQ(Count(out, "dot_accumulate"), 2) << out;
  EXPECT_THAT(out, Not(HasSubstr("all_gather"))) << out;
}

TEST(CollectiveFusionTest, LargerGroupsGetABidirectionalRing) {
  const std::string text = Fused(
      Module("i:5", "0,1,2,3,4", "P(i),P()", "a:f32[4,5] b:f32[5,3]",
             "    c:f32[20,5] = all_gather[axes=(i) axis=0 tiled=True] a\n"
             "    d:f32[20,3] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
             "preferred_element_type=f32] c b\n",
             "d"),
      Always());
  // 5 shards: own, 2 from the left, 2 from the right; 2 transfers each way, 4 steps in all.
  EXPECT_EQ(Count(text, "dot_accumulate"), 5) << text;
  EXPECT_EQ(Count(text, "ppermute_start[axes=(i) perm=((0,1),(1,2),(2,3),(3,4),(4,0))]"), 2)
      << text;
  EXPECT_EQ(Count(text, "ppermute_start[axes=(i) perm=((0,4),(1,0),(2,1),(3,2),(4,3))]"), 2)
      << text;
  EXPECT_EQ(Count(text, "ppermute_done"), 4) << text;
  EXPECT_THAT(text, Not(HasSubstr("all_gather")));
  // Unidirectional when asked: 4 transfers one way.
  CollectiveFusionOptions one_way = Always();
  one_way.bidirectional = false;
  const std::string uni = Fused(
      Module("i:5", "0,1,2,3,4", "P(i),P()", "a:f32[4,5] b:f32[5,3]",
             "    c:f32[20,5] = all_gather[axes=(i) axis=0 tiled=True] a\n"
             "    d:f32[20,3] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
             "preferred_element_type=f32] c b\n",
             "d"),
      one_way);
  EXPECT_EQ(Count(uni, "ppermute_start[axes=(i) perm=((0,1),(1,2),(2,3),(3,4),(4,0))]"), 4)
      << uni;
}

TEST(CollectiveFusionTest, GatheredContractingDimAccumulatesInF32) {
  const std::string text = Fused(
      Module("i:2", "0,1", "P(None,i),P()", "a:bf16[4,5] b:bf16[10,3]",
             "    c:bf16[4,10] = all_gather[axes=(i) axis=1 tiled=True] a\n"
             "    d:bf16[4,3] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
             "preferred_element_type=None] c b\n",
             "d"),
      Always());
  // Each arriving shard multiplies its block of rows of b; the sum is f32, rounded once.
  EXPECT_THAT(text, HasSubstr("f32[4,3] = constant[dtype=f32 shape=(4,3) value=(0)]"));
  EXPECT_EQ(Count(text, "bf16[5,3] = dynamic_slice[slice_sizes=(5,3)] b"), 2) << text;
  EXPECT_EQ(Count(text, "f32[4,3] = dot_accumulate"), 2) << text;
  EXPECT_THAT(text, HasSubstr("bf16[4,3] = convert_element_type[new_dtype=bf16]"));
  EXPECT_THAT(text, Not(HasSubstr("all_gather")));
}

TEST(CollectiveFusionTest, DotIntoPsumScatterBecomesAReduceScatterRing) {
  const std::string text = Fused(
      Module("i:4", "0,1,2,3", "P(None,i),P(i)", "a:f32[8,3] b:f32[3,6]",
             "    c:f32[8,6] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
             "preferred_element_type=f32] a b\n"
             "    d:f32[2,6] = psum_scatter[axes=(i) scatter_dimension=0 tiled=True] c\n",
             "d"),
      Always());
  // The first block's product, then 3 steps: pass the running sum on, add the next product.
  EXPECT_EQ(Count(text, "f32[2,3] = dynamic_slice[slice_sizes=(2,3)] a"), 4) << text;
  EXPECT_EQ(Count(text, "f32[2,6] = dot_general"), 1) << text;
  EXPECT_EQ(Count(text, "ppermute_start[axes=(i) perm=((0,1),(1,2),(2,3),(3,0))]"), 3) << text;
  EXPECT_EQ(Count(text, "f32[2,6] = dot_accumulate"), 3) << text;
  EXPECT_THAT(text, Not(HasSubstr("psum_scatter")));
  EXPECT_THAT(text, Not(HasSubstr("f32[8,6]")));  // the full product is never formed
}

// The seed's variant (d): the block of w a device multiplies is fetched from the device that
// holds it (the device grid transposed); the start where the gather was, the done where the
// slice was.
TEST(CollectiveFusionTest, OneShardSliceOfAGatherIsFetchedDirectly) {
  const std::string body =
      "    c:bf16[8,4] = all_gather[axes=(x) axis=0 tiled=True] b\n"
      "    d:s32[] = axis_index[axes=(y)]\n"
      "    e:s32[] = constant[dtype=s32 value=(4)]\n"
      "    f:s32[] = mul d e\n"
      "    g:s32[] = constant[dtype=s32 value=(0)]\n"
      "    h:bf16[4,4] = dynamic_slice[slice_sizes=(4,4)] c f g\n"
      "    i:f32[2,4] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
      "preferred_element_type=f32] a h\n"
      "    j:f32[2,4] = psum[axes=(y)] i\n";
  EXPECT_EQ(Fused(Module("x:2,y:2", "0,1,2,3", "P(x,y),P(x,None)", "a:bf16[2,4] b:bf16[4,4]",
                         body, "j")),
            Module("x:2,y:2", "0,1,2,3", "P(x,y),P(x,None)", "a:bf16[2,4] b:bf16[4,4]",
                   "    c:future[bf16[4,4]] = ppermute_start[axes=(x,y) "
                   "perm=((0,0),(2,1),(1,2),(3,3))] b\n"
                   "    d:bf16[4,4] = ppermute_done c\n"
                   "    e:f32[2,4] = dot_general[lhs_contracting_dims=(1) "
                   "rhs_contracting_dims=(0) preferred_element_type=f32] a d\n"
                   "    f:f32[2,4] = psum[axes=(y)] e\n",
                   "f"));
  // w varying along y (its spec names y): another device's block is not the same data.
  EXPECT_EQ(Fused(Module("x:2,y:2", "0,1,2,3", "P(x,y),P(x,y)", "a:bf16[2,4] b:bf16[4,4]",
                         body, "j")),
            "(unchanged)");
  // |x| != |y|: no permutation of the grid does it.
  EXPECT_EQ(Fused(Module("x:2,y:4", "0,1,2,3,4,5,6,7", "P(x,y),P(x,None)",
                         "a:bf16[2,4] b:bf16[4,4]", body, "j")),
            "(unchanged)");
}

TEST(CollectiveFusionTest, Bf16PartialSumsTravelInF32) {
  const std::string module =
      Module("y:2", "0,1", "P(None,y),P(y)", "a:bf16[2,4] b:bf16[4,3]",
             "    c:bf16[2,3] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
             "preferred_element_type=None] a b\n"
             "    d:bf16[2,3] = psum[axes=(y)] c\n",
             "d");
  EXPECT_EQ(Fused(module),
            Module("y:2", "0,1", "P(None,y),P(y)", "a:bf16[2,4] b:bf16[4,3]",
                   "    c:f32[2,3] = dot_general[lhs_contracting_dims=(1) "
                   "rhs_contracting_dims=(0) preferred_element_type=f32] a b\n"
                   "    d:f32[2,3] = psum[axes=(y)] c\n"
                   "    e:bf16[2,3] = convert_element_type[new_dtype=bf16] d\n",
                   "e"));
  CollectiveFusionOptions strict;
  strict.f32_partial_sums = false;
  EXPECT_EQ(Fused(module, strict), "(unchanged)");
  // A psum_scatter the time model leaves as it is, likewise.
  const std::string scattered = Fused(
      Module("y:2", "0,1", "P(None,y),P(y)", "a:bf16[2,4] b:bf16[4,3]",
             "    c:bf16[2,3] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
             "preferred_element_type=None] a b\n"
             "    d:bf16[1,3] = psum_scatter[axes=(y) scatter_dimension=0 tiled=True] c\n",
             "d"));
  EXPECT_THAT(scattered, HasSubstr("f32[1,3] = psum_scatter[axes=(y) scatter_dimension=0 "
                                   "tiled=True]"));
  EXPECT_THAT(scattered, HasSubstr("bf16[1,3] = convert_element_type"));
}

// Programs the pass must leave alone.
TEST(CollectiveFusionTest, LeavesAlone) {
  const std::string dot =
      "    d:f32[8,3] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
      "preferred_element_type=f32] c b\n";
  // The time model: a ring step costs more than copying 160 bytes.
  EXPECT_EQ(Fused(Module("i:2", "0,1", "P(i),P()", "a:f32[4,5] b:f32[5,3]", kGatherRows, "d")),
            "(unchanged)");
  // The gathered value has another use: it is formed anyway.
  EXPECT_EQ(Fused(Module("i:2", "0,1", "P(i),P()", "a:f32[4,5] b:f32[5,3]",
                         std::string(kGatherRows), "d, c"),
                  Always()),
            "(unchanged)");
  // Untiled gathers and gathers with axis_index_groups.
  EXPECT_EQ(Fused(Module("i:2", "0,1", "P(i),P()", "a:f32[4,5] b:f32[5,3]",
                         "    c:f32[2,4,5] = all_gather[axes=(i) axis=0 tiled=False] a\n"
                         "    d:f32[2,4,3] = dot_general[lhs_contracting_dims=(2) "
                         "rhs_contracting_dims=(0) preferred_element_type=f32] c b\n",
                         "d"),
                  Always()),
            "(unchanged)");
  EXPECT_EQ(Fused(Module("i:4", "0,1,2,3", "P(i),P()", "a:f32[4,5] b:f32[5,3]",
                         "    c:f32[8,5] = all_gather[axes=(i) axis=0 tiled=True "
                         "axis_index_groups=((0,1),(2,3))] a\n" + dot,
                         "d"),
                  Always()),
            "(unchanged)");
  // A gather along a batch dim.
  EXPECT_EQ(Fused(Module("i:2", "0,1", "P(i),P()", "a:f32[1,4,5] b:f32[2,5,3]",
                         "    c:f32[2,4,5] = all_gather[axes=(i) axis=0 tiled=True] a\n"
                         "    d:f32[2,4,3] = dot_general[lhs_contracting_dims=(2) "
                         "rhs_contracting_dims=(1) lhs_batch_dims=(0) rhs_batch_dims=(0) "
                         "preferred_element_type=f32] c b\n",
                         "d"),
                  Always()),
            "(unchanged)");
  // A product used by more than the psum_scatter.
  EXPECT_EQ(Fused(Module("i:2", "0,1", "P(None,i),P(i)", "a:f32[8,3] b:f32[3,6]",
                         "    c:f32[8,6] = dot_general[lhs_contracting_dims=(1) "
                         "rhs_contracting_dims=(0) preferred_element_type=f32] a b\n"
                         "    d:f32[4,6] = psum_scatter[axes=(i) scatter_dimension=0 "
                         "tiled=True] c\n",
                         "d, c"),
                  Always()),
            "(unchanged)");
  // A single device: nothing to pass around.
  EXPECT_EQ(Fused(Module("i:1", "0", "P(i),P()", "a:f32[4,5] b:f32[5,3]",
                         "    c:f32[4,5] = all_gather[axes=(i) axis=0 tiled=True] a\n"
                         "    d:f32[4,3] = dot_general[lhs_contracting_dims=(1) "
                         "rhs_contracting_dims=(0) preferred_element_type=f32] c b\n",
                         "d"),
                  Always()),
            "(unchanged)");
}

// With the default time model, a ring pays off once the gathered buffer is large.
TEST(CollectiveFusionTest, TheTimeModelTakesLargeGathers) {
  const std::string text = Fused(Module(
      "i:2", "0,1", "P(i),P()", "a:bf16[1024,1024] b:bf16[1024,1024]",
      "    c:bf16[2048,1024] = all_gather[axes=(i) axis=0 tiled=True] a\n"
      "    d:f32[2048,1024] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
      "preferred_element_type=f32] c b\n",
      "d"));
  EXPECT_THAT(text, HasSubstr("dot_accumulate"));
  EXPECT_THAT(text, Not(HasSubstr("all_gather")));
}

// A block of the scattered operand's leading rows is read in place, so the reduce-scatter ring
// pays only its steps; a block of columns is copied out, which a product smaller than the operand
// does not repay.
TEST(CollectiveFusionTest, TheTimeModelPricesTheScatteredOperandsBlocks) {
  auto module = [](int dim, const std::string& result) {
    return Module("x:2,y:2", "0,1,2,3", "P(None,x),P(x,y)", "a:f32[64,4096] b:f32[4096,2048]",
                  "    c:f32[64,2048] = dot_general[lhs_contracting_dims=(1) "
                  "rhs_contracting_dims=(0) preferred_element_type=f32] a b\n"
                  "    d:" + result + " = psum_scatter[axes=(x) scatter_dimension=" +
                      std::to_string(dim) + " tiled=True] c\n",
                  "d");
  };
  EXPECT_THAT(Fused(module(0, "f32[32,2048]")), HasSubstr("dot_accumulate"));
  EXPECT_EQ(Fused(module(1, "f32[64,1024]")), "(unchanged)");
  EXPECT_THAT(Fused(module(1, "f32[64,1024]"), Always()), HasSubstr("dot_accumulate"));
}

}  // namespace
}  // namespace shardjit::passes
