// spmd-partition: annotated global-view IR text in, per-device IR text out.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ir/primitive.h"
#include "passes/spmd/cost.h"
#include "passes/spmd/reshard.h"
#include "passes/spmd/rules.h"
#include "passes/sharding_propagation.h"
#include "passes/spmd_partition.h"

namespace shardjit::passes {
namespace {

using ::testing::HasSubstr;

std::string Header(const std::string& view, const std::string& mesh, const std::string& devices,
                   const std::string& params, const std::string& results) {
  return "module m [view=" + view + " mesh={" + mesh + "} devices=(" + devices +
         ") entry=main param_shardings=(" + params + ") result_shardings=(" + results + ")]\n";
}

std::string Global(const std::string& params, const std::string& results) {
  return Header("global", "x:2,y:2", "0,1,2,3", params, results);
}
std::string PerDevice(const std::string& params, const std::string& results) {
  return Header("per_device", "x:2,y:2", "0,1,2,3", params, results);
}

// Runs the pass; returns the printed module, or the error text.
std::string Partitioned(const std::string& text, bool* changed = nullptr) {
  absl::StatusOr<ir::Module> m = ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status() << "\n" << text;
  if (!m.ok()) return "";
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m) << "\n" << text;
  absl::StatusOr<bool> c = SpmdPartition().Run(*m);
  if (!c.ok()) return "error: " + std::string(c.status().message());
  if (changed != nullptr) *changed = *c;
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m) << "\n" << ir::PrintModule(*m);
  return ir::PrintModule(*m);
}

// w's rows are laid out over x but meet x's columns, laid out over y: device (i, j) needs the block
// device (j, i) holds, one ppermute transposing the device grid (no all_gather, no redundant
// rows), then the local product and the psum over y.
TEST(SpmdPartitionTest, SeedMatmulFetchesItsBlockOfWWithOnePermute) {
  const std::string in =
      Global("P(x,y),P(x,None)", "P(x,None)") +
      "func main = { lambda ; a:bf16[2048,2048] b:bf16[2048,1024]. let\n"
      "    c:bf16[2048,1024] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
      "preferred_element_type=None] a b @sharding(P(x,None))\n"
      "  in (c) }\n";
  const std::string out = Partitioned(in);
  EXPECT_EQ(out,
            PerDevice("P(x,y),P(x,None)", "P(x,None)") +
                "func main = { lambda ; a:bf16[1024,1024] b:bf16[1024,1024]. let\n"
                "    c:bf16[1024,1024] = ppermute[axes=(x,y) perm=((0,0),(2,1),(1,2),(3,3))] b\n"
                "    d:bf16[1024,1024] = dot_general[lhs_contracting_dims=(1) "
                "rhs_contracting_dims=(0) preferred_element_type=None] a c\n"
                "    e:bf16[1024,1024] = psum[axes=(y)] d\n"
                "  in (e) }\n");
  absl::StatusOr<ir::Module> m = ir::ParseModule(out);
  ASSERT_TRUE(m.ok());
  // w's block (2 MiB) and the psum over y (2 MiB).
  EXPECT_EQ(spmd::CommunicatedBytes(*m), 4 << 20);
}

// Layouts that cut the array into blocks of one shape differ by where the blocks live: one
// ppermute moves each to the device that needs it (devices that hold theirs keep them).
TEST(SpmdPartitionTest, ReshardsBetweenEqualBlocksWithOnePermute) {
  EXPECT_EQ(Partitioned(Global("P(x,y)", "P(y,x)") +
                        "func main = { lambda ; a:f32[4,6]. let\n"
                        "    b:f32[4,6] = neg a @sharding(P(x,y))\n"
                        "  in (b) }\n"),
            PerDevice("P(x,y)", "P(y,x)") +
                "func main = { lambda ; a:f32[2,3]. let\n"
                "    b:f32[2,3] = neg a\n"
                "    c:f32[2,3] = ppermute[axes=(x,y) perm=((0,0),(2,1),(1,2),(3,3))] b\n"
                "  in (c) }\n");
  // A 1-D layout moved to the other axis: device (i, j) needs block j, held by (j, *).
  const ir::Mesh mesh = *ir::ParseModule(Global("P(x)", "P(y)") +
                                         "func main = { lambda ; a:f32[4]. let\n  in (a) }\n")
                             ->mutable_mesh();
  std::vector<spmd::ReshardStep> steps = spmd::PlanReshard(mesh, {{{"x"}}}, {{{"y"}}});
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, spmd::ReshardStep::Kind::kPermute);
  EXPECT_EQ(steps[0].axes, (spmd::AxisList{"x", "y"}));
  EXPECT_EQ(spmd::PermutePairs(mesh, steps[0]),
            (std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {2, 1}, {1, 2}, {3, 3}}));
  // Equal layouts need nothing; a layout with other block shapes needs the general plan.
  EXPECT_TRUE(spmd::PlanReshard(mesh, {{{"x"}}}, {{{"x"}}}).empty());
  EXPECT_NE(spmd::PlanReshard(mesh, {{{"x"}}}, {{{"x", "y"}}})[0].kind,
            spmd::ReshardStep::Kind::kPermute);
}

TEST(SpmdPartitionTest, SlicesReplicatedOperandsLocally) {
  // The replicated bias is sliced at axis_index(y) * 2; the splat constant is built locally.
  EXPECT_EQ(Partitioned(Global("P(x,y),P()", "P(x,y)") +
                        "func main = { lambda ; a:f32[8,4] b:f32[4]. let\n"
                        "    c:f32[8,4] = broadcast_in_dim[shape=(8,4) broadcast_dimensions=(1)] b "
                        "@sharding(P(x,y))\n"
                        "    d:f32[8,4] = add a c @sharding(P(x,y))\n"
                        "    e:f32[] = constant[dtype=f32 value=(2)] @sharding(P())\n"
                        "    f:f32[8,4] = broadcast_in_dim[shape=(8,4)] e @sharding(P(x,y))\n"
                        "    g:f32[8,4] = mul d f @sharding(P(x,y))\n"
                        "  in (g) }\n"),
            PerDevice("P(x,y),P()", "P(x,y)") +
                "func main = { lambda ; a:f32[4,2] b:f32[4]. let\n"
                "    c:s32[] = axis_index[axes=(y)]\n"
                "    d:s32[] = constant[dtype=s32 value=(2)]\n"
                "    e:s32[] = mul c d\n"
                "    f:f32[2] = dynamic_slice[slice_sizes=(2)] b e\n"
                "    g:f32[4,2] = broadcast_in_dim[shape=(4,2) broadcast_dimensions=(1)] f\n"
                "    h:f32[4,2] = add a g\n"
                "    i:f32[] = constant[dtype=f32 value=(2)]\n"
                "    j:f32[4,2] = broadcast_in_dim[shape=(4,2)] i\n"
                "    k:f32[4,2] = mul h j\n"
                "  in (k) }\n");
}

// A broadcast annotated replicated whose users want it sharded along the dims it adds (as
// propagation leaves a scalar's broadcast that users in two layouts share): each layout builds
// its own blocks, and the whole array, left unused, is dropped. A use that shards a dim the
// operand fills (c's columns) slices as before.
TEST(SpmdPartitionTest, RebuildsReplicatedBroadcastsInTheLayoutsTheirUsersWant) {
  EXPECT_EQ(Partitioned(Global("P(x,y),P(y,x),P()", "P(x,y),P(y,x),P(x,y)") +
                        "func main = { lambda ; a:f32[8,4] b:f32[8,4] c:f32[4]. let\n"
                        "    d:f32[] = constant[dtype=f32 value=(2)] @sharding(P())\n"
                        "    e:f32[8,4] = broadcast_in_dim[shape=(8,4)] d @sharding(P(None,None))\n"
                        "    f:f32[8,4] = mul a e @sharding(P(x,y))\n"
                        "    g:f32[8,4] = mul b e @sharding(P(y,x))\n"
                        "    h:f32[8,4] = broadcast_in_dim[shape=(8,4) broadcast_dimensions=(1)] c "
                        "@sharding(P(None,None))\n"
                        "    i:f32[8,4] = add a h @sharding(P(x,y))\n"
                        "  in (f, g, i) }\n"),
            PerDevice("P(x,y),P(y,x),P()", "P(x,y),P(y,x),P(x,y)") +
                "func main = { lambda ; a:f32[4,2] b:f32[4,2] c:f32[4]. let\n"
                "    d:f32[] = constant[dtype=f32 value=(2)]\n"
                "    f:f32[4,2] = broadcast_in_dim[shape=(4,2)] d\n"
                "    g:f32[4,2] = mul a f\n"
                "    h:f32[4,2] = broadcast_in_dim[shape=(4,2)] d\n"
                "    i:f32[4,2] = mul b h\n"
                "    j:f32[8,4] = broadcast_in_dim[shape=(8,4) broadcast_dimensions=(1)] c\n"
                "    k:s32[] = axis_index[axes=(x)]\n"
                "    l:s32[] = constant[dtype=s32 value=(4)]\n"
                "    m:s32[] = mul k l\n"
                "    n:s32[] = axis_index[axes=(y)]\n"
                "    o:s32[] = constant[dtype=s32 value=(2)]\n"
                "    p:s32[] = mul n o\n"
                "    q:f32[4,2] = dynamic_slice[slice_sizes=(4,2)] j m p\n"
                "    r:f32[4,2] = add a q\n"
                "  in (g, i, r) }\n");
}

TEST(SpmdPartitionTest, MovesAnAxisBetweenDimensionsWithAllToAll) {
  EXPECT_EQ(Partitioned(Global("P(x,None)", "P(None,x)") +
                        "func main = { lambda ; a:f32[8,8]. let\n"
                        "    b:f32[8,8] = with_sharding_constraint[sharding=P(None,x)] a "
                        "@sharding(P(None,x))\n"
                        "    c:f32[8,8] = neg b @sharding(P(None,x))\n"
                        "  in (c) }\n"),
            PerDevice("P(x,None)", "P(None,x)") +
                "func main = { lambda ; a:f32[4,8]. let\n"
                "    b:f32[8,4] = all_to_all[axes=(x) split_axis=1 concat_axis=0 tiled=True] a\n"
                "    c:f32[8,4] = neg b\n"
                "  in (c) }\n");
}

TEST(SpmdPartitionTest, CombinesReductionsOverShardedDimensions) {
  // The reduced dim 0 of c is split over y: a local reduce_max, then pmax over y; the result is
  // gathered over x to the replicated result sharding.
  EXPECT_EQ(Partitioned(Global("P(x,y)", "P()") +
                        "func main = { lambda ; a:f32[8,12]. let\n"
                        "    b:f32[12,8] = transpose[permutation=(1,0)] a @sharding(P(y,x))\n"
                        "    c:f32[2,6,8] = reshape[new_sizes=(2,6,8)] b @sharding(P(y,None,x))\n"
                        "    d:f32[6,8] = reduce_max[axes=(0)] c @sharding(P(None,x))\n"
                        "  in (d) }\n"),
            PerDevice("P(x,y)", "P()") +
                "func main = { lambda ; a:f32[4,6]. let\n"
                "    b:f32[6,4] = transpose[permutation=(1,0)] a\n"
                "    c:f32[1,6,4] = reshape[new_sizes=(1,6,4)] b\n"
                "    d:f32[6,4] = reduce_max[axes=(0)] c\n"
                "    e:f32[6,4] = pmax[axes=(y)] d\n"
                "    f:f32[6,8] = all_gather[axes=(x) axis=1 tiled=True] e\n"
                "  in (f) }\n");
}

TEST(SpmdPartitionTest, ScattersAPartialContractionTheResultWantsSplit) {
  const std::string header = Header("global", "x:4", "0,1,2,3", "P(None,x),P(x,None)",
                                    "P(x,None)");
  EXPECT_EQ(Partitioned(header +
                        "func main = { lambda ; a:f32[16,32] b:f32[32,8]. let\n"
                        "    c:f32[16,8] = dot_general[lhs_contracting_dims=(1) "
                        "rhs_contracting_dims=(0) preferred_element_type=None] a b "
                        "@sharding(P(x,None))\n"
                        "  in (c) }\n"),
            Header("per_device", "x:4", "0,1,2,3", "P(None,x),P(x,None)", "P(x,None)") +
                "func main = { lambda ; a:f32[16,8] b:f32[8,8]. let\n"
                "    c:f32[16,8] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
                "preferred_element_type=None] a b\n"
                "    d:f32[4,8] = psum_scatter[axes=(x) scatter_dimension=0 tiled=True] c\n"
                "  in (d) }\n");
}

TEST(SpmdPartitionTest, SlicesGatherTheDimensionsTheyCut) {
  // slice gathers the dimension it cuts (and starts at 0 along the others); an iota split along
  // its own dimension is built whole and sliced; the unused dynamic_slice is dropped.
  EXPECT_EQ(Partitioned(Global("P(x,y),P()", "P(),P(x,y)") +
                        "func main = { lambda ; a:f32[8,8] b:s32[]. let\n"
                        "    c:f32[8,4] = slice[start_indices=(0,2) limit_indices=(8,6) "
                        "strides=(1,1)] a @sharding(P(x,None))\n"
                        "    d:f32[2,8] = dynamic_slice[slice_sizes=(2,8)] a b b "
                        "@sharding(P(None,y))\n"
                        "    e:s32[8,8] = iota[dtype=s32 shape=(8,8) dimension=0] "
                        "@sharding(P(x,y))\n"
                        "    f:f32[8,8] = convert_element_type[new_dtype=f32] e "
                        "@sharding(P(x,y))\n"
                        "    g:f32[8,8] = add a f @sharding(P(x,y))\n"
                        "  in (c, g) }\n"),
            PerDevice("P(x,y),P()", "P(),P(x,y)") +
                "func main = { lambda ; a:f32[4,4] b:s32[]. let\n"
                "    c:f32[4,8] = all_gather[axes=(y) axis=1 tiled=True] a\n"
                "    d:f32[4,4] = slice[start_indices=(0,2) limit_indices=(4,6) strides=(1,1)] c\n"
                "    h:s32[8,8] = iota[dtype=s32 shape=(8,8) dimension=0]\n"
                "    i:s32[] = axis_index[axes=(x)]\n"
                "    j:s32[] = constant[dtype=s32 value=(4)]\n"
                "    k:s32[] = mul i j\n"
                "    l:s32[] = axis_index[axes=(y)]\n"
                "    m:s32[] = mul l j\n"
                "    n:s32[4,4] = dynamic_slice[slice_sizes=(4,4)] h k m\n"
                "    o:f32[4,4] = convert_element_type[new_dtype=f32] n\n"
                "    p:f32[4,4] = add a o\n"
                "    q:f32[8,4] = all_gather[axes=(x) axis=0 tiled=True] d\n"
                "  in (q, p) }\n");
}

TEST(SpmdPartitionTest, AxesOfSizeOneNeedNoCollectives) {
  EXPECT_EQ(Partitioned(Header("global", "x:1", "0", "P(None,x),P(x,None)", "P()") +
                        "func main = { lambda ; a:f32[2,4] b:f32[4,2]. let\n"
                        "    c:f32[2,2] = dot_general[lhs_contracting_dims=(1) "
                        "rhs_contracting_dims=(0) preferred_element_type=None] a b @sharding(P())\n"
                        "  in (c) }\n"),
            Header("per_device", "x:1", "0", "P(None,x),P(x,None)", "P()") +
                "func main = { lambda ; a:f32[2,4] b:f32[4,2]. let\n"
                "    c:f32[2,2] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
                "preferred_element_type=None] a b\n"
                "  in (c) }\n");
}

TEST(SpmdPartitionTest, ExpectUnchanged) {
  const std::vector<std::string> unchanged = {
      // A per-device module.
      PerDevice("P(x)", "P(x)") +
          "func main = { lambda ; a:f32[4]. let\n    b:f32[4] = neg a\n  in (b) }\n",
      // An op without a layout (sharding-propagation did not run).
      Global("P(x)", "P(x)") +
          "func main = { lambda ; a:f32[4]. let\n    b:f32[4] = neg a\n  in (b) }\n",
      // An op without a partitioning rule (a fusion, in a loop body): the module keeps running
      // unpartitioned.
      Global("P(x)", "P(x)") +
          "func main = { lambda ; a:f32[4]. let\n"
          "    b:f32[4] = neg a @sharding(P(x))\n"
          "    g:f32[4] = fori_loop[lower=0 upper=2 body={ lambda ; c:s32[] d:f32[4]. let\n"
          "          f:f32[4] = fusion[body={ lambda ; e:f32[4]. let\n"
          "              in (e) }] d @sharding(P(x))\n"
          "        in (f) }] b @sharding(P(x))\n"
          "  in (g) }\n",
      // A loop body without layouts.
      Global("P(x)", "P(x)") +
          "func main = { lambda ; a:f32[4]. let\n"
          "    e:f32[4] = fori_loop[lower=0 upper=2 body={ lambda ; b:s32[] c:f32[4]. let\n"
          "          d:f32[4] = neg c\n"
          "        in (d) }] a @sharding(P(x))\n"
          "  in (e) }\n",
      // A module that only wraps one shard_map: lower-shard-map lowers it.
      Global("P(x)", "P(x)") +
          "func main = { lambda ; a:f32[4]. let\n"
          "    c:f32[4] = shard_map[in_specs=(P(x)) out_specs=(P(x)) body={ lambda ; b:f32[2]. "
          "let\n"
          "        in (b) }] a @sharding(P(x))\n"
          "  in (c) }\n"};
  for (const std::string& text : unchanged) {
    bool changed = true;
    EXPECT_EQ(Partitioned(text, &changed), text);
    EXPECT_FALSE(changed) << text;
  }
}

TEST(SpmdPartitionTest, SaysWhyAModuleStaysUnpartitioned) {
  absl::StatusOr<ir::Module> loop = ir::ParseModule(
      Global("P(x)", "P(x)") +
      "func main = { lambda ; a:f32[4]. let\n"
      "    e:f32[4] = fori_loop[lower=0 upper=2 body={ lambda ; b:s32[] c:f32[4]. let\n"
      "          d:f32[4] = fusion[body={ lambda ; f:f32[4]. let\n"
      "              in (f) }] c\n"
      "        in (d) }] a @sharding(P(x))\n"
      "  in (e) }\n");
  ASSERT_TRUE(loop.ok()) << loop.status();
  absl::Status s = SpmdPartition::CheckPartitionable(*loop);
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("no partitioning rule for fusion (op #0, results f32[4]), in the body of "
                        "op #0 (fori_loop)"));
  absl::StatusOr<ir::Module> bare = ir::ParseModule(
      Global("P(x)", "P(x)") +
      "func main = { lambda ; a:f32[4]. let\n    b:f32[4] = neg a\n  in (b) }\n");
  ASSERT_TRUE(bare.ok());
  EXPECT_THAT(std::string(SpmdPartition::CheckPartitionable(*bare).message()),
              HasSubstr("op #0 (neg) has no @sharding"));
}

TEST(SpmdPartitionTest, InlinesAShardMapBetweenGlobalOps) {
  // The operand is resharded to the in_spec, the body runs on the local block, and the bias add
  // takes the result laid out by the out_spec (P(x): replicated over y).
  EXPECT_EQ(Partitioned(Global("P(None,x),P()", "P(x)") +
                        "func main = { lambda ; a:f32[8,4] b:f32[8]. let\n"
                        "    c:f32[8,4] = neg a @sharding(P(None,x))\n"
                        "    g:f32[8] = shard_map[in_specs=(P(x,y)) out_specs=(P(x)) body={ "
                        "lambda ; d:f32[4,2]. let\n"
                        "          e:f32[4] = reduce_sum[axes=(1)] d\n"
                        "          f:f32[4] = psum[axes=(y)] e\n"
                        "        in (f) }] c @sharding(P(x))\n"
                        "    h:f32[8] = add g b @sharding(P(x))\n"
                        "  in (h) }\n"),
            PerDevice("P(None,x),P()", "P(x)") +
                "func main = { lambda ; a:f32[8,2] b:f32[8]. let\n"
                "    c:f32[8,2] = neg a\n"
                "    d:f32[4,4] = all_to_all[axes=(x) split_axis=0 concat_axis=1 tiled=True] c\n"
                "    e:s32[] = constant[dtype=s32 value=(0)]\n"
                "    f:s32[] = axis_index[axes=(y)]\n"
                "    g:s32[] = constant[dtype=s32 value=(2)]\n"
                "    h:s32[] = mul f g\n"
                "    i:f32[4,2] = dynamic_slice[slice_sizes=(4,2)] d e h\n"
                "    j:f32[4] = reduce_sum[axes=(1)] i\n"
                "    k:f32[4] = psum[axes=(y)] j\n"
                "    l:s32[] = axis_index[axes=(x)]\n"
                "    m:s32[] = constant[dtype=s32 value=(4)]\n"
                "    n:s32[] = mul l m\n"
                "    o:f32[4] = dynamic_slice[slice_sizes=(4)] b n\n"
                "    p:f32[4] = add k o\n"
                "  in (p) }\n");
}

TEST(SpmdPartitionTest, PartitionsALoopBodyWithTheCarrysLayout) {
  // x = tanh(x @ w) three times, x split by rows and w replicated: no communication; the body's
  // result keeps the carry's layout.
  EXPECT_EQ(Partitioned(Global("P(x,None),P()", "P(x,None)") +
                        "func main = { lambda ; a:f32[8,4] b:f32[4,4]. let\n"
                        "    f:f32[8,4] = fori_loop[lower=0 upper=3 body={ lambda ; c:s32[] "
                        "d:f32[8,4]. let\n"
                        "          e:f32[8,4] = dot_general[lhs_contracting_dims=(1) "
                        "rhs_contracting_dims=(0) preferred_element_type=None] d b "
                        "@sharding(P(x,None))\n"
                        "          g:f32[8,4] = tanh e @sharding(P(x,None))\n"
                        "        in (g) }] a @sharding(P(x,None))\n"
                        "  in (f) }\n"),
            PerDevice("P(x,None),P()", "P(x,None)") +
                "func main = { lambda ; a:f32[4,4] b:f32[4,4]. let\n"
                "    g:f32[4,4] = fori_loop[lower=0 upper=3 body={ lambda ; c:s32[] d:f32[4,4]. "
                "let\n"
                "          e:f32[4,4] = dot_general[lhs_contracting_dims=(1) "
                "rhs_contracting_dims=(0) preferred_element_type=None] d b\n"
                "          f:f32[4,4] = tanh e\n"
                "        in (f) }] a\n"
                "  in (g) }\n");
}

TEST(SpmdPartitionTest, ReshardsLoopCarriesAndReadsOfOuterValuesInTheBody) {
  // The carry enters as P(None,y) but the loop keeps it as P(x,None); the body reads the outer
  // P(y) vector, which keeps its layout, and its result is resharded back to the carry's layout.
  EXPECT_EQ(Partitioned(Global("P(None,y),P(y)", "P()") +
                        "func main = { lambda ; a:f32[8,4] b:f32[4]. let\n"
                        "    g:f32[8,4] = fori_loop[lower=0 upper=2 body={ lambda ; c:s32[] "
                        "d:f32[8,4]. let\n"
                        "          e:f32[8,4] = broadcast_in_dim[shape=(8,4) "
                        "broadcast_dimensions=(1)] b @sharding(P(None,y))\n"
                        "          f:f32[8,4] = add d e @sharding(P(None,y))\n"
                        "        in (f) }] a @sharding(P(x,None))\n"
                        "  in (g) }\n"),
            Header("per_device", "x:2,y:2", "0,1,2,3", "P(None,y),P(y)", "P()") +
                "func main = { lambda ; a:f32[8,2] b:f32[2]. let\n"
                "    c:f32[8,4] = all_gather[axes=(y) axis=1 tiled=True] a\n"
                "    d:s32[] = axis_index[axes=(x)]\n"
                "    e:s32[] = constant[dtype=s32 value=(4)]\n"
                "    f:s32[] = mul d e\n"
                "    g:s32[] = constant[dtype=s32 value=(0)]\n"
                "    h:f32[4,4] = dynamic_slice[slice_sizes=(4,4)] c f g\n"
                "    t:f32[4,4] = fori_loop[lower=0 upper=2 body={ lambda ; i:s32[] j:f32[4,4]. "
                "let\n"
                "          k:f32[8,2] = broadcast_in_dim[shape=(8,2) broadcast_dimensions=(1)] b\n"
                "          l:f32[8,4] = all_gather[axes=(x) axis=0 tiled=True] j\n"
                "          m:s32[] = axis_index[axes=(y)]\n"
                "          n:s32[] = constant[dtype=s32 value=(2)]\n"
                "          o:s32[] = mul m n\n"
                "          p:f32[8,2] = dynamic_slice[slice_sizes=(8,2)] l g o\n"
                "          q:f32[8,2] = add p k\n"
                "          r:f32[8,4] = all_gather[axes=(y) axis=1 tiled=True] q\n"
                "          s:f32[4,4] = dynamic_slice[slice_sizes=(4,4)] r f g\n"
                "        in (s) }] h\n"
                "    u:f32[8,4] = all_gather[axes=(x) axis=0 tiled=True] t\n"
                "  in (u) }\n");
}

TEST(SpmdPartitionTest, MegatronMlpAfterPropagation) {
  // Rows split over x, the hidden dimension over y (w1 by columns, w2 by rows): the only
  // communication is the psum over y of the second matmul's partial sums.
  absl::StatusOr<ir::Module> m = ir::ParseModule(
      Header("global", "x:2,y:4", "0,1,2,3,4,5,6,7", "P(x,None),P(None,y),P(y),P(y,None)",
             "P(x,None)") +
      "func main = { lambda ; a:f32[64,32] b:f32[32,128] c:f32[128] d:f32[128,32]. let\n"
      "    e:f32[64,128] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
      "preferred_element_type=None] a b\n"
      "    f:f32[64,128] = broadcast_in_dim[shape=(64,128) broadcast_dimensions=(1)] c\n"
      "    g:f32[64,128] = add e f\n"
      "    h:f32[64,128] = tanh g\n"
      "    i:f32[64,32] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
      "preferred_element_type=None] h d\n"
      "  in (i) }\n");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(*ShardingPropagation().Run(*m));
  ASSERT_TRUE(*SpmdPartition().Run(*m));
  EXPECT_EQ(ir::PrintModule(*m),
            Header("per_device", "x:2,y:4", "0,1,2,3,4,5,6,7",
                   "P(x,None),P(None,y),P(y),P(y,None)", "P(x,None)") +
                "func main = { lambda ; a:f32[32,32] b:f32[32,32] c:f32[32] d:f32[32,32]. let\n"
                "    e:f32[32,32] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
                "preferred_element_type=None] a b\n"
                "    f:f32[32,32] = broadcast_in_dim[shape=(32,32) broadcast_dimensions=(1)] c\n"
                "    g:f32[32,32] = add e f\n"
                "    h:f32[32,32] = tanh g\n"
                "    i:f32[32,32] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) "
                "preferred_element_type=None] h d\n"
                "    j:f32[32,32] = psum[axes=(y)] i\n"
                "  in (j) }\n");
}

TEST(SpmdPartitionTest, LayoutsThatDoNotDivideAreErrors) {
  EXPECT_THAT(Partitioned(Global("P()", "P(x)") +
                          "func main = { lambda ; a:f32[3]. let\n"
                          "    b:f32[3] = neg a @sharding(P())\n"
                          "  in (b) }\n"),
              HasSubstr("error: result_shardings[0]: spec P(x) splits dim 0 (size 3) into 2 "
                        "blocks, which does not divide it; value f32[3]"));
  EXPECT_THAT(Partitioned(Global("P()", "P()") +
                          "func main = { lambda ; a:f32[3,4]. let\n"
                          "    b:f32[3,4] = neg a @sharding(P(y,x))\n"
                          "  in (b) }\n"),
              HasSubstr("error: op #0 (neg) result b: spec P(y, x) splits dim 0 (size 3) into 2 "
                        "blocks"));
}

}  // namespace
}  // namespace shardjit::passes

namespace shardjit::passes {
namespace {

// Every primitive that may appear in a global-view program has a partitioning rule (collectives
// need a mapped axis; kernel ops live inside pallas_call kernels; fusion and dot_accumulate are
// formed after partitioning).
TEST(SpmdRulesTest, EveryGlobalViewPrimitiveHasARule) {
  for (const ir::Primitive* p : ir::AllPrimitives()) {
    // inline-calls removes custom_jvp_call, custom_vjp_call, checkpoint and name before
    // partitioning.
    if (p->kind == ir::PrimitiveKind::kCollective || p->kind == ir::PrimitiveKind::kKernel ||
        p->name == "fusion" || p->name == "dot_accumulate" || p->name == "custom_jvp_call" ||
        p->name == "custom_vjp_call" || p->name == "checkpoint" || p->name == "name") {
      continue;
    }
    ir::Op op;
    op.set_opcode(p->name);
    EXPECT_TRUE(spmd::HasRule(op)) << "no partitioning rule for " << p->name;
  }
}

}  // namespace
}  // namespace shardjit::passes
