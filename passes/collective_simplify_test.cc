// collective-simplify: per-device IR text in, IR text out, and the numbers before and after the
// pass (tools/run_module.h) on random inputs.
#include "passes/collective_simplify.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "tools/run_module.h"

namespace shardjit::passes {
namespace {

std::string Header(const std::string& mesh, const std::string& devices, const std::string& params,
                   const std::string& results) {
  return "module m [view=per_device mesh={" + mesh + "} devices=(" + devices +
         ") entry=main param_shardings=(" + params + ") result_shardings=(" + results + ")]\n";
}
std::string X2(const std::string& params, const std::string& results) {
  return Header("x:2", "0,1", params, results);
}
std::string X2Y2(const std::string& params, const std::string& results) {
  return Header("x:2,y:2", "0,1,2,3", params, results);
}

// Runs the pass on `text`; returns the printed module, or "(unchanged)" when Run says so.
std::string Simplified(const std::string& text, CollectiveSimplifyOptions options = {}) {
  absl::StatusOr<ir::Module> m = ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status() << "\n" << text;
  if (!m.ok()) return "";
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m) << "\n" << text;
  const std::string before = ir::PrintModule(*m);
  absl::StatusOr<bool> changed = CollectiveSimplify(options).Run(*m);
  EXPECT_TRUE(changed.ok()) << changed.status();
  if (!changed.ok()) return "";
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m) << "\n" << ir::PrintModule(*m);
  if (!*changed) {
    EXPECT_EQ(ir::PrintModule(*m), before);
    return "(unchanged)";
  }
  return ir::PrintModule(*m);
}

// Runs `text` before and after the pass on the same random inputs; the results must agree.
void ExpectSameNumbers(const std::string& text) {
  absl::StatusOr<ir::Module> before = ir::ParseModule(text);
  ASSERT_TRUE(before.ok()) << before.status();
  ir::Module after = *before;
  ASSERT_TRUE(CollectiveSimplify().Run(after).ok());
  absl::StatusOr<tools::GlobalSignature> sig = tools::ModuleGlobalSignature(*before);
  ASSERT_TRUE(sig.ok()) << sig.status();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-8, 8);  // exact in f32 sums
  std::vector<ir::Tensor> inputs;
  for (const ir::ShapedType& t : sig->params) {
    std::vector<double> v(t.num_elements());
    for (double& x : v) x = small(rng);
    inputs.push_back(ir::Tensor::FromDoubles(t, v));
  }
  absl::StatusOr<std::vector<ir::Tensor>> want = tools::RunModule(*before, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::vector<ir::Tensor>> got = tools::RunModule(after, inputs);
  ASSERT_TRUE(got.ok()) << got.status() << "\n" << ir::PrintModule(after);
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < got->size(); ++i) {
    EXPECT_EQ((*got)[i].type(), (*want)[i].type());
    EXPECT_EQ((*got)[i].ToDoubles(), (*want)[i].ToDoubles()) << "result " << i;
  }
}

// psum over x, then this device's rows: axis_index(x) * 4.
const std::string kPsumSlice = X2("P(x)", "P(x)") +
                               "func main = { lambda ; a:f32[8,4]. let\n"
                               "    b:f32[8,4] = psum[axes=(x)] a\n"
                               "    c:s32[] = axis_index[axes=(x)]\n"
                               "    d:s32[] = constant[dtype=s32 value=(4)]\n"
                               "    e:s32[] = mul c d\n"
                               "    f:s32[] = constant[dtype=s32 value=(0)]\n"
                               "    g:f32[4,4] = dynamic_slice[slice_sizes=(4,4)] b e f\n"
                               "  in (g) }\n";

TEST(CollectiveSimplifyTest, PsumThenOwnBlockBecomesPsumScatter) {
  EXPECT_EQ(Simplified(kPsumSlice),
            X2("P(x)", "P(x)") +
                "func main = { lambda ; a:f32[8,4]. let\n"
                "    b:f32[4,4] = psum_scatter[axes=(x) scatter_dimension=0 tiled=True] a\n"
                "  in (b) }\n");
  ExpectSameNumbers(kPsumSlice);
}

// The same pattern inside a cond branch and inside a while_loop body: rewritten there too.
const std::string kPsumSliceInBranchAndLoop =
    X2("P(x), P()", "P(x), P(x)") +
    "func main = { lambda ; a:f32[8,4] p:s32[]. let\n"
    "    r:f32[4,4] = cond[branches=({ lambda ; b:f32[8,4]. let\n"
    "          c:f32[4,4] = slice[start_indices=(0,0) limit_indices=(4,4)] b\n"
    "        in (c) },{ lambda ; d:f32[8,4]. let\n"
    "          e:f32[8,4] = psum[axes=(x)] d\n"
    "          f:s32[] = axis_index[axes=(x)]\n"
    "          g:s32[] = constant[dtype=s32 value=(4)]\n"
    "          h:s32[] = mul f g\n"
    "          i:s32[] = constant[dtype=s32 value=(0)]\n"
    "          j:f32[4,4] = dynamic_slice[slice_sizes=(4,4)] e h i\n"
    "        in (j) })] p a\n"
    "    w:f32[8,4] = while_loop[cond={ lambda ; k:f32[8,4]. let\n"
    "          ka:f32[8,4] = abs k\n"
    "          l:f32[] = reduce_sum[axes=(0,1)] ka\n"
    "          m:f32[] = constant[dtype=f32 value=(1000)]\n"
    "          n:pred[] = compare[direction=LT] l m\n"
    "        in (n) } body={ lambda ; o:f32[8,4]. let\n"
    "          q:f32[8,4] = psum[axes=(x)] o\n"
    "          s:s32[] = axis_index[axes=(x)]\n"
    "          t:s32[] = constant[dtype=s32 value=(4)]\n"
    "          u:s32[] = mul s t\n"
    "          v:s32[] = constant[dtype=s32 value=(0)]\n"
    "          x:f32[4,4] = dynamic_slice[slice_sizes=(4,4)] q u v\n"
    "          y:f32[8,4] = concatenate[dimension=0] x x\n"
    "          z:f32[8,4] = add y o\n"
    "        in (z) }] a\n"
    "  in (r, w) }\n";

TEST(CollectiveSimplifyTest, RewritesInsideBranchesAndWhileLoops) {
  const std::string out = Simplified(kPsumSliceInBranchAndLoop);
  int scatters = 0;
  for (size_t at = out.find("psum_scatter"); at != std::string::npos;
       at = out.find("psum_scatter", at + 1)) {
    ++scatters;
  }
  EXPECT_EQ(scatters, 2) << out;
  EXPECT_EQ(out.find("= psum["), std::string::npos) << out;
  ExpectSameNumbers(kPsumSliceInBranchAndLoop);
}

// Tuple axes, the block along dimension 1, the constant on the left of the mul.
const std::string kPsumSliceTuple = X2Y2("P(x,y)", "P(None,(x,y))") +
                                    "func main = { lambda ; a:f32[3,8]. let\n"
                                    "    b:f32[3,8] = psum[axes=(x,y)] a\n"
                                    "    c:s32[] = axis_index[axes=(x,y)]\n"
                                    "    d:s32[] = constant[dtype=s32 value=(2)]\n"
                                    "    e:s32[] = mul d c\n"
                                    "    f:s32[] = constant[dtype=s32 value=(0)]\n"
                                    "    g:f32[3,2] = dynamic_slice[slice_sizes=(3,2)] b f e\n"
                                    "  in (g) }\n";

TEST(CollectiveSimplifyTest, PsumScatterOverTupleAxes) {
  EXPECT_EQ(Simplified(kPsumSliceTuple),
            X2Y2("P(x,y)", "P(None,(x,y))") +
                "func main = { lambda ; a:f32[3,8]. let\n"
                "    b:f32[3,2] = psum_scatter[axes=(x,y) scatter_dimension=1 tiled=True] a\n"
                "  in (b) }\n");
  ExpectSameNumbers(kPsumSliceTuple);
}

// The transpose of dynamic_slice(all_gather(w, x), axis_index(y) * block): the cotangent placed
// at block y of zeros and reduce-scattered over x. Device (x, y) keeps the sum over x when x == y.
const std::string kScatterOfOneBlock = X2Y2("P(x,y)", "P(x,y)") +
                                       "func main = { lambda ; a:f32[2,3]. let\n"
                                       "    b:f32[4,3] = constant[dtype=f32 shape=(4,3) value=(0)]\n"
                                       "    c:s32[] = axis_index[axes=(y)]\n"
                                       "    d:s32[] = constant[dtype=s32 value=(2)]\n"
                                       "    e:s32[] = mul c d\n"
                                       "    f:s32[] = constant[dtype=s32 value=(0)]\n"
                                       "    g:f32[4,3] = dynamic_update_slice b a e f\n"
                                       "    h:f32[2,3] = psum_scatter[axes=(x) scatter_dimension=0 "
                                       "tiled=True] g\n"
                                       "  in (h) }\n";

TEST(CollectiveSimplifyTest, ScatterOfOneBlockBecomesAPsumOfTheBlock) {
  const std::string out = Simplified(kScatterOfOneBlock);
  EXPECT_NE(out.find("psum[axes=(x)] a"), std::string::npos) << "[" << out << "]";
  EXPECT_NE(out.find("= select "), std::string::npos) << out;
  EXPECT_EQ(out.find("psum_scatter"), std::string::npos) << out;
  EXPECT_EQ(out.find("dynamic_update_slice"), std::string::npos) << out;
  ExpectSameNumbers(kScatterOfOneBlock);
  // The start passed through scalar reshapes (as a residual between shard_maps is).
  std::string reshaped = kScatterOfOneBlock;
  reshaped.replace(reshaped.find("    f:s32[] = constant"), 0,
                   "    e1:s32[1] = reshape[new_sizes=(1)] e\n    e2:s32[] = reshape[] e1\n");
  reshaped.replace(reshaped.find("dynamic_update_slice b a e f"), 28,
                   "dynamic_update_slice b a e2 f");
  EXPECT_EQ(Simplified(reshaped).find("psum_scatter"), std::string::npos);
  ExpectSameNumbers(reshaped);
  // The block's index varying over the scattered axes: unchanged.
  std::string over_x = kScatterOfOneBlock;
  over_x.replace(over_x.find("axis_index[axes=(y)]"), 20, "axis_index[axes=(x)]");
  EXPECT_EQ(Simplified(over_x), "(unchanged)");
}

TEST(CollectiveSimplifyTest, PsumSlicesThatAreNotTheDevicesBlockAreUnchanged) {
  const std::string psum = "func main = { lambda ; a:f32[8,4]. let\n"
                           "    b:f32[8,4] = psum[axes=(x)] a\n";
  // Block size 4, but the start steps by 2.
  EXPECT_EQ(Simplified(X2("P(x)", "P()") + psum +
                       "    c:s32[] = axis_index[axes=(x)]\n"
                       "    d:s32[] = constant[dtype=s32 value=(2)]\n"
                       "    e:s32[] = mul c d\n"
                       "    f:f32[4,4] = dynamic_slice[slice_sizes=(4,4)] b e e\n"
                       "  in (f) }\n"),
            "(unchanged)");
  // The start follows another axis than the psum's.
  EXPECT_EQ(Simplified(X2Y2("P(x)", "P()") + psum +
                       "    c:s32[] = axis_index[axes=(y)]\n"
                       "    d:s32[] = constant[dtype=s32 value=(4)]\n"
                       "    e:s32[] = mul c d\n"
                       "    f:s32[] = constant[dtype=s32 value=(0)]\n"
                       "    g:f32[4,4] = dynamic_slice[slice_sizes=(4,4)] b e f\n"
                       "  in (g) }\n"),
            "(unchanged)");
  // The psum has another user (here: it is returned).
  EXPECT_EQ(Simplified(X2("P(x)", "P(),P()") + psum +
                       "    c:s32[] = axis_index[axes=(x)]\n"
                       "    d:s32[] = constant[dtype=s32 value=(4)]\n"
                       "    e:s32[] = mul c d\n"
                       "    f:s32[] = constant[dtype=s32 value=(0)]\n"
                       "    g:f32[4,4] = dynamic_slice[slice_sizes=(4,4)] b e f\n"
                       "  in (g, b) }\n"),
            "(unchanged)");
}

// A gather whose only use takes back this device's own rows.
const std::string kSelfGather = X2("P(x)", "P(x)") +
                                "func main = { lambda ; a:f32[4,3]. let\n"
                                "    b:f32[8,3] = all_gather[axes=(x) axis=0 tiled=True] a\n"
                                "    c:s32[] = axis_index[axes=(x)]\n"
                                "    d:s32[] = constant[dtype=s32 value=(4)]\n"
                                "    e:s32[] = mul c d\n"
                                "    f:s32[] = constant[dtype=s32 value=(0)]\n"
                                "    g:f32[4,3] = dynamic_slice[slice_sizes=(4,3)] b e f\n"
                                "    h:f32[4,3] = add g g\n"
                                "  in (h) }\n";

TEST(CollectiveSimplifyTest, AllGatherOfTheDevicesOwnBlockIsRemoved) {
  EXPECT_EQ(Simplified(kSelfGather), X2("P(x)", "P(x)") +
                                         "func main = { lambda ; a:f32[4,3]. let\n"
                                         "    b:f32[4,3] = add a a\n"
                                         "  in (b) }\n");
  ExpectSameNumbers(kSelfGather);
}

TEST(CollectiveSimplifyTest, AllGatherWithOtherUsesIsUnchanged) {
  const std::string gather = "func main = { lambda ; a:f32[4,3]. let\n"
                             "    b:f32[8,3] = all_gather[axes=(x) axis=0 tiled=True] a\n"
                             "    c:s32[] = axis_index[axes=(x)]\n"
                             "    d:s32[] = constant[dtype=s32 value=(4)]\n"
                             "    e:s32[] = mul c d\n"
                             "    f:s32[] = constant[dtype=s32 value=(0)]\n"
                             "    g:f32[4,3] = dynamic_slice[slice_sizes=(4,3)] b e f\n";
  EXPECT_EQ(Simplified(X2("P(x)", "P(x),P()") + gather + "  in (g, b) }\n"), "(unchanged)");
  // Another device's block: axis_index(x) * 4 + 4 is clamped to the last block.
  EXPECT_EQ(Simplified(X2("P(x)", "P(x)") +
                       "func main = { lambda ; a:f32[4,3]. let\n"
                       "    b:f32[8,3] = all_gather[axes=(x) axis=0 tiled=True] a\n"
                       "    c:s32[] = constant[dtype=s32 value=(4)]\n"
                       "    d:s32[] = constant[dtype=s32 value=(0)]\n"
                       "    e:f32[4,3] = dynamic_slice[slice_sizes=(4,3)] b c d\n"
                       "  in (e) }\n"),
            "(unchanged)");
}

// psum over y of a value that is the same on every device along y: x * 2.
const std::string kInvariantPsum = X2Y2("P(x)", "P(x),P(x)") +
                                   "func main = { lambda ; a:f32[4]. let\n"
                                   "    b:f32[4] = psum[axes=(y)] a\n"
                                   "    c:f32[4] = pmax[axes=(y)] b\n"
                                   "  in (b, c) }\n";

TEST(CollectiveSimplifyTest, ReductionsOfInvariantValuesAreLocal) {
  EXPECT_EQ(Simplified(kInvariantPsum),
            X2Y2("P(x)", "P(x),P(x)") +
                "func main = { lambda ; a:f32[4]. let\n"
                "    b:f32[4] = constant[dtype=f32 shape=(4) value=(2)]\n"
                "    c:f32[4] = mul a b\n"
                "  in (c, c) }\n");
  ExpectSameNumbers(kInvariantPsum);
  // A psum's result is invariant across its axes; axis_index of another axis is too.
  EXPECT_EQ(Simplified(X2Y2("P(x)", "P(),P()") +
                       "func main = { lambda ; a:f32[4]. let\n"
                       "    b:f32[4] = psum[axes=(x)] a\n"
                       "    c:f32[4] = psum[axes=(x)] b\n"
                       "    d:s32[] = axis_index[axes=(y)]\n"
                       "    e:s32[] = psum[axes=(x)] d\n"
                       "  in (c, e) }\n"),
            X2Y2("P(x)", "P(),P()") +
                "func main = { lambda ; a:f32[4]. let\n"
                "    b:f32[4] = psum[axes=(x)] a\n"
                "    c:f32[4] = constant[dtype=f32 shape=(4) value=(2)]\n"
                "    d:f32[4] = mul b c\n"
                "    e:s32[] = axis_index[axes=(y)]\n"
                "    f:s32[] = constant[dtype=s32 value=(2)]\n"
                "    g:s32[] = mul e f\n"
                "  in (d, g) }\n");
}

TEST(CollectiveSimplifyTest, ReductionsOfVaryingValuesAreUnchanged) {
  // The param's blocks differ along x.
  EXPECT_EQ(Simplified(X2Y2("P(x)", "P()") +
                       "func main = { lambda ; a:f32[4]. let\n"
                       "    b:f32[4] = psum[axes=(x)] a\n"
                       "  in (b) }\n"),
            "(unchanged)");
  // axis_index(x) varies along x.
  EXPECT_EQ(Simplified(X2("P()", "P()") +
                       "func main = { lambda ; a:f32[4]. let\n"
                       "    b:s32[] = axis_index[axes=(x)]\n"
                       "    c:f32[] = convert_element_type[new_dtype=f32] b\n"
                       "    d:f32[] = pmax[axes=(x)] c\n"
                       "  in (d) }\n"),
            "(unchanged)");
  // What precv and ragged_all_to_all return differs by device, even from invariant operands.
  EXPECT_EQ(Simplified(X2("P()", "P()") +
                       "func main = { lambda ; a:f32[4]. let\n"
                       "    b:pred[0] = psend[axes=(x) perm=((0,1))] a\n"
                       "    c:f32[4] = precv[axes=(x) perm=((0,1)) dtype=f32 shape=(4)] b\n"
                       "    d:f32[4] = psum[axes=(x)] c\n"
                       "  in (d) }\n"),
            "(unchanged)");
  EXPECT_EQ(Simplified(X2("P()", "P()") +
                       "func main = { lambda ; a:f32[4]. let\n"
                       "    b:s32[2] = constant[dtype=s32 shape=(2) value=(0)]\n"
                       "    c:s32[2] = constant[dtype=s32 shape=(2) value=(1)]\n"
                       "    d:f32[4] = ragged_all_to_all[axes=(x)] a a b c b c\n"
                       "    e:f32[4] = psum[axes=(x)] d\n"
                       "  in (e) }\n"),
            "(unchanged)");
}

// Two independent psums over x (one 2-D, one 1-D) and one that depends on the first.
const std::string kTwoPsums = X2("P(x),P(x)", "P(),P(),P()") +
                              "func main = { lambda ; a:f32[2,3] b:f32[4]. let\n"
                              "    c:f32[2,3] = psum[axes=(x)] a\n"
                              "    d:f32[4] = psum[axes=(x)] b\n"
                              "    e:f32[2,3] = mul c a\n"
                              "    f:f32[2,3] = psum[axes=(x)] e\n"
                              "  in (c, d, f) }\n";

TEST(CollectiveSimplifyTest, CombinesIndependentPsums) {
  EXPECT_EQ(Simplified(kTwoPsums),
            X2("P(x),P(x)", "P(),P(),P()") +
                "func main = { lambda ; a:f32[2,3] b:f32[4]. let\n"
                "    c:f32[6] = reshape[new_sizes=(6)] a\n"
                "    d:f32[10] = concatenate[dimension=0] c b\n"
                "    e:f32[10] = psum[axes=(x)] d\n"
                "    f:f32[6] = slice[start_indices=(0) limit_indices=(6) strides=(1)] e\n"
                "    g:f32[2,3] = reshape[new_sizes=(2,3)] f\n"
                "    h:f32[4] = slice[start_indices=(6) limit_indices=(10) strides=(1)] e\n"
                "    i:f32[2,3] = mul g a\n"
                "    j:f32[2,3] = psum[axes=(x)] i\n"
                "  in (g, h, j) }\n");
  ExpectSameNumbers(kTwoPsums);
  // Over the byte limit, nothing is combined.
  EXPECT_EQ(Simplified(kTwoPsums, {.combine_max_bytes = 32}), "(unchanged)");
}

TEST(CollectiveSimplifyTest, CombinesIndependentTiledAllGathers) {
  const std::string two_gathers = X2("P(x),P(x)", "P(),P()") +
                                  "func main = { lambda ; a:f32[2,3] b:f32[4]. let\n"
                                  "    c:f32[4,3] = all_gather[axes=(x) axis=0 tiled=True] a\n"
                                  "    d:f32[8] = all_gather[axes=(x) axis=0 tiled=True] b\n"
                                  "    e:f32[4,3] = mul c c\n"
                                  "  in (e, d) }\n";
  // Each device contributes one row [a, b] of 6 + 4 values; the gathered rows' column ranges
  // reshape back to the two results.
  EXPECT_EQ(Simplified(two_gathers),
            X2("P(x),P(x)", "P(),P()") +
                "func main = { lambda ; a:f32[2,3] b:f32[4]. let\n"
                "    c:f32[1,6] = reshape[new_sizes=(1,6)] a\n"
                "    d:f32[1,4] = reshape[new_sizes=(1,4)] b\n"
                "    e:f32[1,10] = concatenate[dimension=1] c d\n"
                "    f:f32[2,10] = all_gather[axes=(x) axis=0 tiled=True] e\n"
                "    g:f32[2,6] = slice[start_indices=(0,0) limit_indices=(2,6) strides=(1,1)] f\n"
                "    h:f32[4,3] = reshape[new_sizes=(4,3)] g\n"
                "    i:f32[2,4] = slice[start_indices=(0,6) limit_indices=(2,10) strides=(1,1)] f\n"
                "    j:f32[8] = reshape[new_sizes=(8)] i\n"
                "    k:f32[4,3] = mul h h\n"
                "  in (k, j) }\n");
  ExpectSameNumbers(two_gathers);
}

TEST(CollectiveSimplifyTest, DoesNotCombineAcrossAxesOrDtypes) {
  EXPECT_EQ(Simplified(X2Y2("P(x,y),P(x,y),P(x)", "P(),P(),P()") +
                       "func main = { lambda ; a:f32[2,2] b:f32[2,2] c:s32[2]. let\n"
                       "    d:f32[2,2] = psum[axes=(x)] a\n"
                       "    e:f32[2,2] = psum[axes=(y)] b\n"
                       "    f:s32[2] = psum[axes=(x)] c\n"
                       "  in (d, e, f) }\n"),
            "(unchanged)");
}

TEST(CollectiveSimplifyTest, SimplifiesShardMapBodiesOfGlobalModules) {
  const std::string in =
      "module m [view=global mesh={x:2} devices=(0,1) entry=main]\n"
      "func main = { lambda ; a:f32[16,4]. let\n"
      "    h:f32[8,4] = shard_map[in_specs=(P(x)) out_specs=(P(x)) body={ lambda ; b:f32[8,4]. "
      "let\n"
      "          c:f32[8,4] = psum[axes=(x)] b\n"
      "          d:s32[] = axis_index[axes=(x)]\n"
      "          e:s32[] = constant[dtype=s32 value=(4)]\n"
      "          f:s32[] = mul d e\n"
      "          g:f32[4,4] = dynamic_slice[slice_sizes=(4,4)] c f f\n"
      "        in (g) }] a\n"
      "  in (h) }\n";
  absl::StatusOr<ir::Module> m = ir::ParseModule(in);
  ASSERT_TRUE(m.ok()) << m.status();
  // The start of dimension 1 does not matter: a whole dimension always starts at 0.
  EXPECT_NE(Simplified(in).find("psum_scatter[axes=(x) scatter_dimension=0 tiled=True] b"),
            std::string::npos)
      << Simplified(in);
  ExpectSameNumbers(in);
  // In the default pipeline it runs after lower-shard-map, on the per-device module.
  ASSERT_TRUE(DefaultPipeline().Run(*m).ok());
  EXPECT_NE(ir::PrintModule(*m).find("b:f32[4,4] = psum_scatter[axes=(x) scatter_dimension=0"),
            std::string::npos)
      << ir::PrintModule(*m);
}

}  // namespace
}  // namespace shardjit::passes
