// fuse-elementwise: IR text in, IR text out.
#include <string>

#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/fuse_elementwise.h"

namespace shardjit::passes {
namespace {

std::string Module(const std::string& params, const std::string& body, const std::string& results) {
  return "module m [view=per_device mesh={x:2} devices=(0,1) entry=main param_shardings=() "
         "result_shardings=()]\nfunc main = { lambda ; " +
         params + ". let\n" + body + "  in (" + results + ") }\n";
}

std::string Fused(const std::string& text, bool* changed = nullptr,
                  FuseElementwiseOptions options = {}) {
  absl::StatusOr<ir::Module> m = ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m);
  FuseElementwise pass(options);
  absl::StatusOr<bool> c = pass.Run(*m);
  EXPECT_TRUE(c.ok()) << c.status();
  if (changed) *changed = *c;
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m) << "\n" << ir::PrintModule(*m);
  return ir::PrintModule(*m);
}

TEST(FuseElementwiseTest, FusesAnMlpTail) {
  bool changed = false;
  EXPECT_EQ(Fused(Module("a:f32[4,8] b:f32[4,8] c:f32[4,8]",
                         "    d:f32[4,8] = mul a b\n"
                         "    e:f32[4,8] = add d c\n"
                         "    f:f32[] = constant[dtype=f32 value=(0)]\n"
                         "    g:f32[4,8] = broadcast_in_dim[shape=(4,8)] f\n"
                         "    h:f32[4,8] = max e g\n"
                         "    i:bf16[4,8] = convert_element_type[new_dtype=bf16] h\n",
                         "i"),
                  &changed),
            Module("a:f32[4,8] b:f32[4,8] c:f32[4,8]",
                   "    d:f32[] = constant[dtype=f32 value=(0)]\n"
                   "    n:bf16[4,8] = fusion[body={ lambda ; e:f32[4,8] f:f32[4,8] g:f32[4,8] "
                   "h:f32[]. let\n"
                   "          i:f32[4,8] = mul e f\n"
                   "          j:f32[4,8] = add i g\n"
                   "          k:f32[4,8] = broadcast_in_dim[shape=(4,8)] h\n"
                   "          l:f32[4,8] = max j k\n"
                   "          m:bf16[4,8] = convert_element_type[new_dtype=bf16] l\n"
                   "        in (m) }] a b c d\n",
                   "n"));
  EXPECT_TRUE(changed);
}

TEST(FuseElementwiseTest, FusesADagWithASharedIntermediate) {
  EXPECT_EQ(Fused(Module("a:f32[8]",
                         "    b:f32[8] = exp a\n"
                         "    c:f32[8] = mul b b\n"
                         "    d:f32[8] = add c b\n",
                         "d")),
            Module("a:f32[8]",
                   "    f:f32[8] = fusion[body={ lambda ; b:f32[8]. let\n"
                   "          c:f32[8] = exp b\n"
                   "          d:f32[8] = mul c c\n"
                   "          e:f32[8] = add d c\n"
                   "        in (e) }] a\n",
                   "f"));
}

TEST(FuseElementwiseTest, UnchangedForASingleOp) {
  const std::string text = Module("a:f32[8] b:f32[8]", "    c:f32[8] = add a b\n", "c");
  bool changed = true;
  EXPECT_EQ(Fused(text, &changed), text);
  EXPECT_FALSE(changed);
}

TEST(FuseElementwiseTest, UnchangedWhenTheIntermediateIsUsedElsewhere) {
  // c is a result too, so fusing c into d would compute it twice.
  const std::string text = Module("a:f32[8] b:f32[8]",
                                  "    c:f32[8] = mul a b\n"
                                  "    d:f32[8] = neg c\n",
                                  "c, d");
  bool changed = true;
  EXPECT_EQ(Fused(text, &changed), text);
  EXPECT_FALSE(changed);
}

TEST(FuseElementwiseTest, UnchangedBelowTheMinimumGroupSize) {
  const std::string text = Module("a:f32[8] b:f32[8]",
                                  "    c:f32[8] = mul a b\n"
                                  "    d:f32[8] = neg c\n",
                                  "d");
  bool changed = true;
  EXPECT_EQ(Fused(text, &changed, {.min_group_size = 3}), text);
  EXPECT_FALSE(changed);
}

TEST(FuseElementwiseTest, StopsAtNonElementwiseOps) {
  EXPECT_EQ(Fused(Module("a:f32[2,4]",
                         "    b:f32[2,4] = neg a\n"
                         "    c:f32[2,4] = abs b\n"
                         "    d:f32[4,2] = transpose[permutation=(1,0)] c\n"
                         "    e:f32[4,2] = neg d\n",
                         "e")),
            Module("a:f32[2,4]",
                   "    e:f32[2,4] = fusion[body={ lambda ; b:f32[2,4]. let\n"
                   "          c:f32[2,4] = neg b\n"
                   "          d:f32[2,4] = abs c\n"
                   "        in (d) }] a\n"
                   "    f:f32[4,2] = transpose[permutation=(1,0)] e\n"
                   "    g:f32[4,2] = neg f\n",
                   "g"));
}

TEST(FuseElementwiseTest, FusesALoneTranscendentalButNotALoneAdd) {
  // tanh's own kernel calls the C library per element; the generated loop does not. A lone add
  // gains nothing from a fusion.
  EXPECT_EQ(Fused(Module("a:f32[2,4] b:f32[2,4]",
                         "    c:f32[2,4] = add a b\n"
                         "    d:f32[4,2] = transpose[permutation=(1,0)] c\n"
                         "    e:f32[4,2] = tanh d\n",
                         "e")),
            Module("a:f32[2,4] b:f32[2,4]",
                   "    c:f32[2,4] = add a b\n"
                   "    d:f32[4,2] = transpose[permutation=(1,0)] c\n"
                   "    g:f32[4,2] = fusion[body={ lambda ; e:f32[4,2]. let\n"
                   "          f:f32[4,2] = tanh e\n"
                   "        in (f) }] d\n",
                   "g"));
}

TEST(FuseElementwiseTest, FusesInsideLoopBodiesWithCapturedOperands) {
  EXPECT_EQ(Fused(Module("a:f32[4] b:f32[4]",
                         "    f:f32[4] = fori_loop[lower=0 upper=2 body={ lambda ; c:s32[] "
                         "d:f32[4]. let\n"
                         "          e:f32[4] = mul d b\n"
                         "          g:f32[4] = add e b\n"
                         "        in (g) }] a\n",
                         "f")),
            Module("a:f32[4] b:f32[4]",
                   "    j:f32[4] = fori_loop[lower=0 upper=2 body={ lambda ; c:s32[] "
                   "d:f32[4]. let\n"
                   "          i:f32[4] = fusion[body={ lambda ; e:f32[4] f:f32[4]. let\n"
                   "                g:f32[4] = mul e f\n"
                   "                h:f32[4] = add g f\n"
                   "              in (h) }] d b\n"
                   "        in (i) }] a\n",
                   "j"));
}

// Softmax's broadcasts of its row maximum and row sum (one element per row) and a mask shared
// by every batch (one row's worth) join the loops that use them; a broadcast along a middle
// dimension (a rotary table over batch and heads) does not.
TEST(FuseElementwiseTest, FusesBroadcastsThatRowsRead) {
  EXPECT_EQ(Fused(Module("a:f32[2,4,8] b:f32[2,4]",
                         "    c:f32[2,4,8] = broadcast_in_dim[shape=(2,4,8) "
                         "broadcast_dimensions=(0,1)] b\n"
                         "    d:f32[2,4,8] = sub a c\n"
                         "    e:f32[2,4,8] = exp d\n",
                         "e")),
            Module("a:f32[2,4,8] b:f32[2,4]",
                   "    h:f32[2,4,8] = fusion[body={ lambda ; c:f32[2,4] d:f32[2,4,8]. let\n"
                   "          e:f32[2,4,8] = broadcast_in_dim[shape=(2,4,8) "
                   "broadcast_dimensions=(0,1)] c\n"
                   "          f:f32[2,4,8] = sub d e\n"
                   "          g:f32[2,4,8] = exp f\n"
                   "        in (g) }] b a\n",
                   "h"));
  // Broadcasts that need different rows (2 x 4 rows of 8; 2 rows of 32) stay apart: the add
  // takes the mask shared by both batches, the row maximum is broadcast on its own.
  EXPECT_EQ(Fused(Module("a:f32[2,4,8] b:f32[2,4] c:f32[4,8]",
                         "    d:f32[2,4,8] = broadcast_in_dim[shape=(2,4,8) "
                         "broadcast_dimensions=(0,1)] b\n"
                         "    e:f32[2,4,8] = sub a d\n"
                         "    f:f32[2,4,8] = broadcast_in_dim[shape=(2,4,8) "
                         "broadcast_dimensions=(1,2)] c\n"
                         "    g:f32[2,4,8] = add e f\n",
                         "g")),
            Module("a:f32[2,4,8] b:f32[2,4] c:f32[4,8]",
                   "    d:f32[2,4,8] = broadcast_in_dim[shape=(2,4,8) broadcast_dimensions=(0,1)] "
                   "b\n"
                   "    k:f32[2,4,8] = fusion[body={ lambda ; e:f32[2,4,8] f:f32[2,4,8] "
                   "g:f32[4,8]. let\n"
                   "          h:f32[2,4,8] = sub e f\n"
                   "          i:f32[2,4,8] = broadcast_in_dim[shape=(2,4,8) "
                   "broadcast_dimensions=(1,2)] g\n"
                   "          j:f32[2,4,8] = add h i\n"
                   "        in (j) }] a d c\n",
                   "k"));
  // A broadcast along a middle dimension is never fused.
  bool changed = true;
  const std::string middle = Module("a:f32[2,4,8] b:f32[4]",
                                    "    c:f32[2,4,8] = broadcast_in_dim[shape=(2,4,8) "
                                    "broadcast_dimensions=(1)] b\n"
                                    "    d:f32[2,4,8] = mul a c\n",
                                    "d");
  EXPECT_EQ(Fused(middle, &changed), middle);
  EXPECT_FALSE(changed);
}

// megablox's tail: rows past the groups' total zeroed. The iota along rows and the zeros are
// not built: a fusion reads iota[4] by rows and the scalar 0; an iota along a middle dimension
// (no row form) stays an array.
TEST(FuseElementwiseTest, ReadsIotasAndSplatConstantsAsBroadcasts) {
  EXPECT_EQ(Fused(Module("a:f32[4,8] b:s32[]",
                         "    c:s32[4,8] = iota[dtype=s32 shape=(4,8) dimension=0]\n"
                         "    d:s32[4,8] = broadcast_in_dim[shape=(4,8)] b\n"
                         "    e:pred[4,8] = compare[direction=LT] c d\n"
                         "    f:f32[4,8] = constant[dtype=f32 shape=(4,8) value=(0)]\n"
                         "    g:f32[4,8] = select e a f\n",
                         "g")),
            Module("a:f32[4,8] b:s32[]",
                   "    c:s32[4] = iota[dtype=s32 shape=(4) dimension=0]\n"
                   "    d:f32[] = constant[dtype=f32 value=(0)]\n"
                   "    n:f32[4,8] = fusion[body={ lambda ; e:s32[4] f:s32[] g:f32[] h:f32[4,8]. let\n"
                   "          i:s32[4,8] = broadcast_in_dim[shape=(4,8) broadcast_dimensions=(0)] e\n"
                   "          j:s32[4,8] = broadcast_in_dim[shape=(4,8)] f\n"
                   "          k:pred[4,8] = compare[direction=LT] i j\n"
                   "          l:f32[4,8] = broadcast_in_dim[shape=(4,8)] g\n"
                   "          m:f32[4,8] = select k h l\n"
                   "        in (m) }] c b d a\n",
                   "n"));
  const std::string middle = Module("a:s32[2,3,4]",
                                    "    b:s32[2,3,4] = iota[dtype=s32 shape=(2,3,4) dimension=1]\n"
                                    "    c:s32[2,3,4] = add a b\n"
                                    "    d:s32[2,3,4] = mul c c\n",
                                    "d");
  const std::string fused = Fused(middle);
  EXPECT_NE(fused.find("iota[dtype=s32 shape=(2,3,4) dimension=1]"), std::string::npos) << fused;
}

}  // namespace
}  // namespace shardjit::passes
