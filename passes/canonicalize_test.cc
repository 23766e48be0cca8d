// canonicalize: IR text in, IR text out.
#include <string>

#include "backends/reference/kernel.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/canonicalize.h"

namespace shardjit::passes {
namespace {

std::string Module(const std::string& params, const std::string& body, const std::string& results) {
  return "module m [view=per_device mesh={x:2,y:1} devices=(0,1) entry=main param_shardings=() "
         "result_shardings=()]\nfunc main = { lambda ; " +
         params + ". let\n" + body + "  in (" + results + ") }\n";
}

// Runs canonicalize (with constant folding) and returns the printed module with canonical names.
std::string Canonicalized(const std::string& text, bool* changed = nullptr) {
  absl::StatusOr<ir::Module> m = ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m);
  Canonicalize pass({.evaluate = backends::reference::EvaluateLocalOp});
  absl::StatusOr<bool> c = pass.Run(*m);
  EXPECT_TRUE(c.ok()) << c.status();
  if (changed) *changed = *c;
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m);
  for (ir::Function& f : *m->mutable_functions()) ir::CanonicalizeValueIds(f);
  return ir::PrintModule(*m);
}

TEST(CanonicalizeTest, RemovesCommonSubexpressions) {
  EXPECT_EQ(Canonicalized(Module("a:f32[4] b:f32[4]",
                                 "    c:f32[4] = mul a b\n"
                                 "    d:f32[4] = mul a b\n"
                                 "    e:f32[4] = add c d\n",
                                 "e")),
            Module("a:f32[4] b:f32[4]",
                   "    c:f32[4] = mul a b\n"
                   "    d:f32[4] = add c c\n",
                   "d"));
}

TEST(CanonicalizeTest, FoldsConstants) {
  EXPECT_EQ(Canonicalized(Module("a:s32[]",
                                 "    b:s32[] = constant[dtype=s32 value=(6)]\n"
                                 "    c:s32[] = constant[dtype=s32 value=(7)]\n"
                                 "    d:s32[] = mul b c\n"
                                 "    e:s32[] = add a d\n",
                                 "e")),
            Module("a:s32[]",
                   "    b:s32[] = constant[dtype=s32 value=(42)]\n"
                   "    c:s32[] = add a b\n",
                   "c"));
  // A dense fold keeps every value; a splat keeps one.
  EXPECT_EQ(Canonicalized(Module("",
                                 "    a:s32[3] = iota[dtype=s32 shape=(3) dimension=0]\n"
                                 "    b:f32[3] = convert_element_type[new_dtype=f32] a\n"
                                 "    c:f32[2,3] = broadcast_in_dim[shape=(2,3) "
                                 "broadcast_dimensions=(1)] b\n",
                                 "c")),
            Module("", "    a:f32[2,3] = constant[dtype=f32 shape=(2,3) value=(0,1,2,0,1,2)]\n",
                   "a"));
}

TEST(CanonicalizeTest, AppliesIdentities) {
  EXPECT_EQ(Canonicalized(Module("a:f32[2,3] b:s32[2,3]",
                                 "    c:f32[] = constant[dtype=f32 value=(1)]\n"
                                 "    d:f32[2,3] = broadcast_in_dim[shape=(2,3) "
                                 "broadcast_dimensions=()] c\n"
                                 "    e:f32[2,3] = mul a d\n"
                                 "    f:f32[2,3] = reshape[new_sizes=(2,3)] e\n"
                                 "    g:f32[2,3] = transpose[permutation=(0,1)] f\n"
                                 "    h:f32[2,3] = psum[axes=(y)] g\n"
                                 "    i:s32[2,3] = constant[dtype=s32 shape=(2,3) value=(0)]\n"
                                 "    j:s32[2,3] = add i b\n",
                                 "h, j")),
            Module("a:f32[2,3] b:s32[2,3]", "", "a, b"));
}

TEST(CanonicalizeTest, KeepsFloatAddOfZeroAndRealCollectives) {
  const std::string text = Module("a:f32[2]",
                                  "    b:f32[2] = constant[dtype=f32 shape=(2) value=(0)]\n"
                                  "    c:f32[2] = add a b\n"
                                  "    d:f32[2] = psum[axes=(x)] c\n",
                                  "d");
  bool changed = true;
  EXPECT_EQ(Canonicalized(text, &changed), text);
  EXPECT_FALSE(changed);
}

// The wrap of a negative start index (select(i < 0, i + d, i), as lax.dynamic_slice traces it)
// goes when i cannot be negative: axis_index * 3 + 1 on x:2 lies in [1, 4].
TEST(CanonicalizeTest, DropsTheWrapOfIndicesThatCannotBeNegative) {
  EXPECT_EQ(Canonicalized(Module("a:f32[8]",
                                 "    b:s32[] = axis_index[axes=(x)]\n"
                                 "    c:s32[] = constant[dtype=s32 value=(3)]\n"
                                 "    d:s32[] = mul b c\n"
                                 "    e:s32[] = constant[dtype=s32 value=(1)]\n"
                                 "    f:s32[] = add d e\n"
                                 "    g:s32[] = constant[dtype=s32 value=(0)]\n"
                                 "    h:pred[] = compare[direction=LT] f g\n"
                                 "    i:s32[] = constant[dtype=s32 value=(8)]\n"
                                 "    j:s32[] = add f i\n"
                                 "    k:s32[] = select h j f\n"
                                 "    l:f32[4] = dynamic_slice[slice_sizes=(4)] a k\n",
                                 "l")),
            Module("a:f32[8]",
                   "    b:s32[] = axis_index[axes=(x)]\n"
                   "    c:s32[] = constant[dtype=s32 value=(3)]\n"
                   "    d:s32[] = mul b c\n"
                   "    e:s32[] = constant[dtype=s32 value=(1)]\n"
                   "    f:s32[] = add d e\n"
                   "    g:f32[4] = dynamic_slice[slice_sizes=(4)] a f\n",
                   "g"));
}

// A value that may be negative (a parameter, axis_index - 1) keeps its wrap; so does a sum whose
// bound overflows s32 (axis_index * 2e9 + 2e9 wraps, so it may be negative).
TEST(CanonicalizeTest, KeepsTheWrapOfIndicesThatMayBeNegative) {
  for (const char* index : {"    f:s32[] = add p p\n",
                            "    e:s32[] = constant[dtype=s32 value=(-1)]\n"
                            "    f:s32[] = add b e\n",
                            "    e:s32[] = constant[dtype=s32 value=(2000000000)]\n"
                            "    m:s32[] = mul b e\n"
                            "    f:s32[] = add m e\n"}) {
    const std::string text = Module("a:f32[8] p:s32[]",
                                    std::string("    b:s32[] = axis_index[axes=(x)]\n") + index +
                                        "    g:s32[] = constant[dtype=s32 value=(0)]\n"
                                        "    h:pred[] = compare[direction=LT] f g\n"
                                        "    i:s32[] = constant[dtype=s32 value=(8)]\n"
                                        "    j:s32[] = add f i\n"
                                        "    k:s32[] = select h j f\n"
                                        "    l:f32[4] = dynamic_slice[slice_sizes=(4)] a k\n",
                                    "l");
    EXPECT_NE(Canonicalized(text).find("select"), std::string::npos) << index;
  }
}

// A fori_loop's index lies in [lower, upper - 1]: (i + axis_index) rem 2 >= 0 inside the body.
TEST(CanonicalizeTest, KnowsTheRangeOfALoopIndex) {
  const std::string text = Module(
      "a:f32[4]",
      "    z:f32[2] = constant[dtype=f32 shape=(2) value=(0)]\n"
      "    r:f32[2] = fori_loop[lower=0 upper=3 body={ lambda ; i:s32[] c:f32[2]. let\n"
      "          b:s32[] = axis_index[axes=(x)]\n"
      "          d:s32[] = add i b\n"
      "          e:s32[] = constant[dtype=s32 value=(2)]\n"
      "          f:s32[] = rem d e\n"
      "          g:s32[] = constant[dtype=s32 value=(0)]\n"
      "          h:pred[] = compare[direction=GE] f g\n"
      "          j:f32[2] = dynamic_slice[slice_sizes=(2)] a f\n"
      "          k:f32[2] = select h j c\n"
      "        in (k) }] z\n",
      "r");
  const std::string out = Canonicalized(text);
  EXPECT_EQ(out.find("select"), std::string::npos) << out;
  EXPECT_EQ(out.find("compare"), std::string::npos) << out;
}

TEST(CanonicalizeTest, WorksInsideRegions) {
  std::string text =
      "module m [view=global mesh={x:2} devices=(0,1) entry=main param_shardings=() "
      "result_shardings=()]\n"
      "func main = { lambda ; a:f32[4]. let\n"
      "    f:f32[4] = shard_map[in_specs=(P(x)) out_specs=(P(x)) body={ lambda ; b:f32[2]. let\n"
      "          c:f32[2] = neg b\n"
      "          d:f32[2] = neg b\n"
      "          e:f32[2] = sub c d\n"
      "        in (e) }] a\n"
      "  in (f) }\n";
  std::string want =
      "module m [view=global mesh={x:2} devices=(0,1) entry=main param_shardings=() "
      "result_shardings=()]\n"
      "func main = { lambda ; a:f32[4]. let\n"
      "    e:f32[4] = shard_map[in_specs=(P(x)) out_specs=(P(x)) body={ lambda ; b:f32[2]. let\n"
      "          c:f32[2] = neg b\n"
      "          d:f32[2] = sub c c\n"
      "        in (d) }] a\n"
      "  in (e) }\n";
  EXPECT_EQ(Canonicalized(text), want);
}

}  // namespace
}  // namespace shardjit::passes
