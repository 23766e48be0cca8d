// The verifier (and through it every shape rule) rejects malformed modules with an error that
// names the op and the shapes or attribute at fault.
#include <functional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace shardjit::ir {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

absl::Status VerifyText(const std::string& view, const std::string& params,
                        const std::string& body, const std::string& result,
                        const std::string& header_extra = "") {
  std::string text = "module m [view=" + view +
                     " mesh={x:2,y:2} devices=(0,1,2,3) entry=main" + header_extra +
                     "]\nfunc main = { lambda ; " + params + ". let\n" + body + "  in (" +
                     result + ") }\n";
  absl::StatusOr<Module> m = ParseModule(text);
  if (!m.ok()) return m.status();
  return VerifyModule(*m);
}

struct BadModule {
  std::string name;
  std::string view, params, body, result;
  std::vector<std::string> fragments;
};

class VerifierErrorTest : public ::testing::TestWithParam<BadModule> {};

TEST_P(VerifierErrorTest, RejectsWithAClearMessage) {
  const BadModule& c = GetParam();
  absl::Status s = VerifyText(c.view, c.params, c.body, c.result);
  ASSERT_FALSE(s.ok()) << c.name;
  for (const std::string& f : c.fragments) {
    EXPECT_THAT(std::string(s.message()), HasSubstr(f)) << c.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    ShapeRules, VerifierErrorTest,
    ::testing::Values(
        BadModule{"DtypeMismatch", "per_device", "a:f32[2,3] b:bf16[2,3]",
                  "    c:f32[2,3] = add a b\n", "c",
                  {"add: operand types differ (f32[2,3] vs bf16[2,3])", "op #0"}},
        BadModule{"ShapeMismatch", "per_device", "a:f32[2,3] b:f32[3,2]",
                  "    c:f32[2,3] = mul a b\n", "c", {"mul: operand types differ"}},
        BadModule{"WrongDeclaredType", "per_device", "a:f32[2,3]", "    b:f32[3,2] = neg a\n",
                  "b", {"declared f32[3,2] but the shape rule gives f32[2,3]"}},
        BadModule{"CondIndexNotS32", "per_device", "a:f32[] b:f32[2]",
                  "    d:f32[2] = cond[branches=({ lambda ; c:f32[2]. let\n"
                  "        in (c) })] a b\n",
                  "d", {"cond: the first operand (the branch index) must be s32[]"}},
        BadModule{"WhileParamsDiffer", "per_device", "a:f32[2]",
                  "    e:f32[2] = while_loop[cond={ lambda ; b:f32[3]. let\n"
                  "          c:pred[] = constant[dtype=pred value=(1)]\n"
                  "        in (c) } body={ lambda ; d:f32[2]. let\n"
                  "        in (d) }] a\n",
                  "e", {"while_loop: cond param 0 is f32[3], expected f32[2]"}},
        BadModule{"CustomVjpBwdWrongType", "per_device", "a:f32[2]",
                  "    g:f32[2] = custom_vjp_call[fun={ lambda ; b:f32[2]. let\n"
                  "        in (b) } fwd={ lambda ; c:f32[2]. let\n"
                  "        in (c) } bwd={ lambda ; d:f32[2]. let\n"
                  "          e:f32[] = reduce_sum[axes=(0)] d\n"
                  "        in (e) }] a\n",
                  "g",
                  {"custom_vjp_call: bwd returns (f32[]); a custom VJP bwd rule's output (one "
                   "cotangent per primal input, of its shape and dtype) must be (f32[2])"}},
        BadModule{"CustomJvpRuleTakesPrimalsOnly", "per_device", "a:f32[2]",
                  "    d:f32[2] = custom_jvp_call[fun={ lambda ; b:f32[2]. let\n"
                  "        in (b) } jvp={ lambda ; c:f32[2]. let\n"
                  "        in (c, c) }] a\n",
                  "d", {"custom_jvp_call: jvp takes 1 params; expected 2 (f32[2], f32[2])"}},
        BadModule{"CheckpointBodyParams", "per_device", "a:f32[2]",
                  "    c:f32[2] = checkpoint[body={ lambda ; b:f32[3]. let\n"
                  "        in (b) }] a\n",
                  "c", {"checkpoint: body param 0 is f32[3], expected f32[2]"}},
        BadModule{"UnknownAxis", "per_device", "a:bf16[1024,1024]",
                  "    b:bf16[1024,1024] = psum[axes=(z)] a\n", "b",
                  {"psum: axis \"z\" is not in mesh {x:2, y:2}", "bf16[1024,1024]"}},
        BadModule{"CollectiveOutsideShardMap", "global", "a:f32[4]",
                  "    b:f32[4] = psum[axes=(x)] a\n", "b",
                  {"psum: collectives need a mapped axis", "f32[4]"}},
        BadModule{"AllGatherBadAxis", "per_device", "a:f32[2,3]",
                  "    b:f32[2,6] = all_gather[axes=(x) axis=2 tiled=True] a\n", "b",
                  {"all_gather: axis 2 is out of range [0, 1]", "f32[2,3]"}},
        BadModule{"PpermuteDuplicateSource", "per_device", "a:f32[2]",
                  "    b:f32[2] = ppermute[axes=(x) perm=((0,1),(0,0))] a\n", "b",
                  {"ppermute: perm has source 0 twice"}},
        BadModule{"PpermuteDuplicateTarget", "per_device", "a:f32[2]",
                  "    b:f32[2] = ppermute[axes=(x) perm=((0,1),(1,1))] a\n", "b",
                  {"ppermute: perm has target 1 twice"}},
        BadModule{"PpermuteOutOfRange", "per_device", "a:f32[2]",
                  "    b:f32[2] = ppermute[axes=(x) perm=((0,2))] a\n", "b",
                  {"ppermute: perm pair (0,2) is out of range for axis size 2"}},
        BadModule{"GroupsDoNotCover", "per_device", "a:f32[2]",
                  "    b:f32[2] = psum[axes=(x,y) axis_index_groups=((0,1),(1,2))] a\n", "b",
                  {"psum: axis_index_groups must cover all indices"}},
        BadModule{"PsumScatterUntiledSize", "per_device", "a:f32[3,2]",
                  "    b:f32[2] = psum_scatter[axes=(x) scatter_dimension=0 tiled=False] a\n",
                  "b", {"psum_scatter: scatter_dimension 0 (size 3) must equal the axis size 2"}},
        BadModule{"AllToAllNotDivisible", "per_device", "a:f32[3,2]",
                  "    b:f32[3,2] = all_to_all[axes=(x) split_axis=0 concat_axis=1 tiled=True] a\n",
                  "b", {"all_to_all: split_axis 0 (size 3) is not divisible by the axis size 2"}},
        BadModule{"DotContractingMismatch", "per_device", "a:f32[2,3] b:f32[4,5]",
                  "    c:f32[2,5] = dot_general[lhs_contracting_dims=(1) "
                  "rhs_contracting_dims=(0)] a b\n",
                  "c", {"dot_general: contracting dim sizes differ", "f32[2,3], f32[4,5]"}},
        BadModule{"DynamicSliceIndexType", "per_device", "a:f32[4] b:f32[]",
                  "    c:f32[2] = dynamic_slice[slice_sizes=(2)] a b\n", "c",
                  {"dynamic_slice: start index 0 must be an integer scalar, got f32[]"}},
        BadModule{"ReshapeCount", "per_device", "a:f32[2,3]",
                  "    b:f32[4] = reshape[new_sizes=(4)] a\n", "b",
                  {"reshape: new_sizes (4) has 4 elements, operand has 6"}},
        BadModule{"SpecDoesNotDivide", "global", "a:f32[3,4]",
                  "    c:f32[3,4] = shard_map[in_specs=(P(x)) out_specs=(P(x)) body={ lambda ; "
                  "b:f32[1,4]. let\n    in (b) }] a\n",
                  "c", {"splits dim 0 (size 3) into 2 blocks, which does not divide it"}},
        BadModule{"ShardMapBodyCapturesOuterValue", "global", "a:f32[4] b:f32[4]",
                  "    e:f32[4] = shard_map[in_specs=(P(x)) out_specs=(P(x)) body={ lambda ; "
                  "c:f32[2]. let\n      d:f32[2] = add c b\n    in (d) }] a\n",
                  "e", {"value b is not defined before its use"}},
        BadModule{"ShardingConstraintUnknownAxis", "global", "a:f32[4,4]",
                  "    b:f32[4,4] = with_sharding_constraint[sharding=P(z)] a\n", "b",
                  {"with_sharding_constraint: sharding: axis \"z\" of spec P(z) is not in mesh",
                   "f32[4,4]"}},
        BadModule{"ShardingConstraintDoesNotDivide", "global", "a:f32[3,4]",
                  "    b:f32[3,4] = with_sharding_constraint[sharding=P(x,y)] a\n", "b",
                  {"splits dim 0 (size 3) into 2 blocks"}},
        BadModule{"ShardingAnnotationCount", "global", "a:f32[4]",
                  "    b:f32[4] = neg a @sharding(P(x),P())\n", "b",
                  {"has 1 results but 2 @sharding specs"}},
        BadModule{"ShardingAnnotationRank", "global", "a:f32[4]",
                  "    b:f32[4] = neg a @sharding(P(x,y))\n", "b",
                  {"@sharding of result b: spec P(x, y) has 2 entries for an array of rank 1"}},
        BadModule{"LoopBodyWrongCarry", "per_device", "a:f32[2]",
                  "    e:f32[2] = fori_loop[lower=0 upper=2 body={ lambda ; b:s32[] c:f32[2]. "
                  "let\n      d:f32[2,1] = reshape[new_sizes=(2,1)] c\n    in (d) }] a\n",
                  "e", {"fori_loop: body returns (f32[2,1]), which differs from the carry types"}},
        BadModule{"FusionBodyCapturesOuterValue", "per_device", "a:f32[4] b:f32[4]",
                  "    e:f32[4] = fusion[body={ lambda ; c:f32[4]. let\n"
                  "      d:f32[4] = add c b\n    in (d) }] a\n",
                  "e", {"value b is not defined before its use"}},
        BadModule{"FusionParamType", "per_device", "a:f32[4]",
                  "    d:f32[4] = fusion[body={ lambda ; b:bf16[4]. let\n"
                  "      c:bf16[4] = neg b\n    in (c) }] a\n",
                  "d", {"fusion: body param 0 is bf16[4], but operand 0 is f32[4]"}},
        BadModule{"FusionNotElementwise", "per_device", "a:f32[4]",
                  "    d:f32[2,2] = fusion[body={ lambda ; b:f32[4]. let\n"
                  "      c:f32[2,2] = reshape[new_sizes=(2,2)] b\n    in (c) }] a\n",
                  "d", {"fusion: body op reshape is not elementwise"}},
        BadModule{"FusionResultShape", "per_device", "a:f32[4] b:f32[]",
                  "    e:f32[2] = fusion[body={ lambda ; c:f32[4] d:f32[]. let\n"
                  "      f:f32[2] = broadcast_in_dim[shape=(2)] d\n    in (f) }] a b\n",
                  "e", {"fusion: operand 0 is f32[4], not of the result's shape f32[2], and is "
                        "not read by broadcasts only"}},
        BadModule{"FusionOperandReadWhole", "per_device", "a:f32[4] b:f32[2,4]",
                  "    e:f32[2,4] = fusion[body={ lambda ; c:f32[4] d:f32[2,4]. let\n"
                  "      f:f32[2,4] = broadcast_in_dim[shape=(2,4) broadcast_dimensions=(1)] c\n"
                  "      g:f32[4] = neg c\n"
                  "      h:f32[2,4] = add f d\n    in (h) }] a b\n",
                  "e", {"fusion: operand 0 is f32[4], not of the result's shape f32[2,4], and is "
                        "not read by broadcasts only"}}),
    [](const ::testing::TestParamInfo<BadModule>& info) { return info.param.name; });

// Every misuse of a future (ir/async.h) is rejected, naming the future and the ops.
const char kStart[] = "    b:future[f32[2]] = ppermute_start[axes=(x) perm=((0,1),(1,0))] a\n";
INSTANTIATE_TEST_SUITE_P(
    Futures, VerifierErrorTest,
    ::testing::Values(
        BadModule{"Dropped", "per_device", "a:f32[2]", kStart, "a",
                  {"future b (of a ppermute_start) is never awaited"}},
        BadModule{"UsedTwice", "per_device", "a:f32[2]",
                  std::string(kStart) + "    c:f32[2] = ppermute_done b\n"
                                        "    d:f32[2] = ppermute_done b\n",
                  "c, d", {"future b is used twice", "op #2 (ppermute_done)"}},
        BadModule{"WrongDone", "per_device", "a:f32[2]",
                  std::string(kStart) + "    c:f32[2] = psum_done b\n", "c",
                  {"psum_done cannot await future b of a ppermute_start"}},
        BadModule{"ReadByAnotherOp", "per_device", "a:f32[2]",
                  std::string(kStart) + "    c:f32[2] = neg b\n    d:f32[2] = ppermute_done b\n",
                  "c, d", {"neg: operand 0 is a future (future[f32[2]])"}},
        BadModule{"DoneOfAnArray", "per_device", "a:f32[2]", "    b:f32[2] = ppermute_done a\n",
                  "b", {"ppermute_done: operand must be the future of a ppermute_start"}},
        BadModule{"AwaitedInsideALoop", "per_device", "a:f32[2]",
                  std::string(kStart) +
                      "    f:f32[2] = fori_loop[lower=0 upper=2 body={ lambda ; c:s32[] d:f32[2]. let\n"
                      "          e:f32[2] = ppermute_done b\n"
                      "        in (e) }] a\n",
                  "f", {"future b is used outside the region that defines it"}},
        BadModule{"ResultOfTheFunction", "per_device", "a:f32[2]", kStart, "b",
                  {"result b is a future; only a fori_loop body may return one"}},
        BadModule{"ParamOfTheFunction", "per_device", "a:future[f32[2]]",
                  "    b:f32[2] = ppermute_done a\n", "b",
                  {"param a is a future, but only fori_loop carries may be"}},
        BadModule{"ResultOfAShardMapBody", "global", "a:f32[4]",
                  "    e:f32[2] = shard_map[in_specs=(P(x)) out_specs=(P(x)) body={ lambda ; "
                  "b:f32[2]. let\n"
                  "          c:future[f32[2]] = ppermute_start[axes=(x) perm=((0,1),(1,0))] b\n"
                  "        in (c) }] a\n",
                  "e", {"result c is a future; only a fori_loop body may return one"}},
        BadModule{"CarryOfAnotherKind", "per_device", "a:f32[2]",
                  std::string(kStart) +
                      "    g:future[f32[2]] = fori_loop[lower=0 upper=2 body={ lambda ; c:s32[] "
                      "d:future[f32[2]]. let\n"
                      "          e:f32[2] = ppermute_done d\n"
                      "          f:future[f32[2]] = psum_start[axes=(x)] e\n"
                      "        in (f) }] b\n"
                      "    h:f32[2] = ppermute_done g\n",
                  "h", {"result f is the future of a psum_start, but carry 0 is the future of a "
                        "ppermute_start"}},
        BadModule{"CarryAwaitedWithTheWrongDone", "per_device", "a:f32[2]",
                  std::string(kStart) +
                      "    g:future[f32[2]] = fori_loop[lower=0 upper=2 body={ lambda ; c:s32[] "
                      "d:future[f32[2]]. let\n"
                      "          e:f32[2] = ppermute_done d\n"
                      "          f:future[f32[2]] = ppermute_start[axes=(x) perm=((0,1))] e\n"
                      "        in (f) }] b\n"
                      "    h:f32[2] = all_gather_done g\n",
                  "h", {"all_gather_done cannot await future g of a ppermute_start"}},
        BadModule{"CarryDroppedInTheBody", "per_device", "a:f32[2]",
                  std::string(kStart) +
                      "    g:future[f32[2]] = fori_loop[lower=0 upper=2 body={ lambda ; c:s32[] "
                      "d:future[f32[2]]. let\n"
                      "          f:future[f32[2]] = ppermute_start[axes=(x) perm=((0,1))] a\n"
                      "        in (f) }] b\n"
                      "    h:f32[2] = ppermute_done g\n",
                  "h", {"future d (of a ppermute_start) is never awaited"}},
        BadModule{"StartOutsideShardMap", "global", "a:f32[2]",
                  "    b:future[f32[2]] = ppermute_start[axes=(x) perm=((0,1),(1,0))] a\n"
                  "    c:f32[2] = ppermute_done b\n",
                  "c", {"ppermute_start: collectives need a mapped axis"}}),
    [](const ::testing::TestParamInfo<BadModule>& info) { return info.param.name; });

// Attribute values that do not fit the type or range they feed (an s32 loop index or literal, a
// dimension of the shape) are refused by the op's rule, naming the attribute and its value.
INSTANTIATE_TEST_SUITE_P(
    AttributeRanges, VerifierErrorTest,
    ::testing::Values(
        BadModule{"ForiLoopUpperPastS32", "per_device", "a:f32[2]",
                  "    e:f32[2] = fori_loop[lower=0 upper=9223372036854775807 body={ lambda ; "
                  "b:s32[] c:f32[2]. let\n    in (c) }] a\n",
                  "e",
                  {"fori_loop: upper=9223372036854775807 does not fit the loop index type s32",
                   "f32[2]"}},
        BadModule{"ForiLoopUpperJustPastS32", "per_device", "a:f32[2]",
                  "    e:f32[2] = fori_loop[lower=0 upper=2147483648 body={ lambda ; "
                  "b:s32[] c:f32[2]. let\n    in (c) }] a\n",
                  "e", {"fori_loop: upper=2147483648 does not fit the loop index type s32"}},
        BadModule{"ForiLoopLowerPastS32", "per_device", "a:f32[2]",
                  "    e:f32[2] = fori_loop[lower=-2147483649 upper=0 body={ lambda ; "
                  "b:s32[] c:f32[2]. let\n    in (c) }] a\n",
                  "e", {"fori_loop: lower=-2147483649 does not fit the loop index type s32"}},
        BadModule{"ConstantPastS32", "per_device", "a:f32[2]",
                  "    b:s32[] = constant[dtype=s32 value=(2147483648)]\n", "a",
                  {"constant: value[0]=2147483648 does not fit s32"}},
        BadModule{"ConstantBelowS32", "per_device", "a:f32[2]",
                  "    b:s32[2] = constant[dtype=s32 shape=(2) value=(1,-2147483649)]\n", "a",
                  {"constant: value[1]=-2147483649 does not fit s32"}},
        BadModule{"ConstantNanAsS32", "per_device", "a:f32[2]",
                  "    b:s32[] = constant[dtype=s32 value=(nan)]\n", "a",
                  {"constant: value[0]=nan does not fit s32"}},
        BadModule{"ConstantInfAsS32", "per_device", "a:f32[2]",
                  "    b:s32[] = constant[dtype=s32 value=(-inf)]\n", "a",
                  {"constant: value[0]=-inf does not fit s32"}},
        BadModule{"ConstantPastF32", "per_device", "a:f32[2]",
                  "    b:f32[] = constant[dtype=f32 value=(1e39)]\n", "a",
                  {"constant: value[0]=1e+39 does not fit f32 (it rounds to inf"}},
        BadModule{"ConstantPastBf16", "per_device", "a:f32[2]",
                  "    b:bf16[] = constant[dtype=bf16 value=(-3.4028234663852886e38)]\n", "a",
                  {"constant: value[0]=-3.4028234663852886e+38 does not fit bf16 (it rounds to "
                   "inf; the largest finite bf16 is 3.3895313892515355e+38)"}},
        BadModule{"ConstantShapePastTheLimits", "per_device", "a:f32[2]",
                  "    b:f32[4294967296,4294967296,4294967296] = constant[dtype=f32 "
                  "shape=(4294967296,4294967296,4294967296) value=(0)]\n",
                  "a", {"constant: shape: type f32[4294967296,4294967296,4294967296] has more"}},
        BadModule{"IotaPastS32", "per_device", "a:f32[2]",
                  "    b:s32[2,2147483649] = iota[dtype=s32 shape=(2,2147483649) dimension=1]\n",
                  "a",
                  {"iota: shape[1]=2147483649 (dimension=1) makes values up to 2147483648, which "
                   "do not fit s32"}},
        BadModule{"IotaNegativeShape", "per_device", "a:f32[2]",
                  "    b:s32[-1,2] = iota[dtype=s32 shape=(-1,2) dimension=1]\n", "a",
                  {"iota: shape has a negative dimension"}},
        BadModule{"IotaDimensionPastRank", "per_device", "a:f32[2]",
                  "    b:s32[2] = iota[dtype=s32 shape=(2) dimension=1]\n", "a",
                  {"iota: dimension 1 is out of range for shape s32[2]"}},
        BadModule{"TransposeRepeatsAnAxis", "per_device", "a:f32[2,3]",
                  "    b:f32[2,2] = transpose[permutation=(0,0)] a\n", "b",
                  {"transpose: permutation repeats dimension 0"}},
        BadModule{"SliceNegativeStride", "per_device", "a:f32[4]",
                  "    b:f32[2] = slice[start_indices=(3) limit_indices=(1) strides=(-1)] a\n",
                  "b", {"slice: bad slice [3:1:-1] of dim 0 (size 4)"}},
        BadModule{"ConcatenateDimensionPastRank", "per_device", "a:f32[4]",
                  "    b:f32[8] = concatenate[dimension=1] a a\n", "b",
                  {"concatenate: dimension 1 is out of range for rank 1"}},
        BadModule{"GroupsOfUnequalSize", "per_device", "a:f32[2]",
                  "    b:f32[2] = all_gather[axes=(x,y) axis=0 tiled=True "
                  "axis_index_groups=((0,1,2),(3))] a\n",
                  "b", {"all_gather: axis_index_groups must all have the same size"}},
        BadModule{"InvariantAllGatherWithGroups", "per_device", "a:f32[2]",
                  "    b:f32[4] = all_gather[axes=(x,y) axis=0 tiled=True "
                  "axis_index_groups=((0,1),(2,3)) invariant=True] a\n",
                  "b", {"all_gather: invariant=True takes no axis_index_groups"}},
        BadModule{"RefParamOutsideKernels", "per_device", "a:ref[f32[8]]",
                  "    b:f32[8] = neg a\n", "b",
                  {"param a is a ref, but only pallas_call kernels and index maps take refs"}},
        BadModule{"KernelOpOutsideKernels", "per_device", "a:f32[8]",
                  "    b:s32[] = program_id[axis=0]\n", "b",
                  {"program_id: only allowed inside a pallas_call kernel"}},
        BadModule{"BlockShapeRank", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[grid=(2) in_specs=(((4,1),{ lambda ; c:s32[]. let\n"
                  "        in (c, c) })) out_specs=(ANY) out_shapes=(f32[8]) "
                  "kernel={ lambda ; d:ref[f32[4,1]] e:ref[f32[8]]. let\n        in () }] a\n",
                  "b", {"in_specs[0] has a block shape of rank 2 (4,1) for an array of rank 1"}},
        BadModule{"IndexMapResults", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[grid=(2) in_specs=(((4),{ lambda ; c:s32[]. let\n"
                  "        in (c, c) })) out_specs=(ANY) out_shapes=(f32[8]) "
                  "kernel={ lambda ; d:ref[f32[4]] e:ref[f32[8]]. let\n        in () }] a\n",
                  "b", {"in_specs[0] index_map returns 2 values; expected one block index per "
                        "array dimension (1)"}},
        BadModule{"IndexMapArity", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[grid=(2,3) in_specs=(((4),{ lambda ; c:s32[]. let\n"
                  "        in (c) })) out_specs=(ANY) out_shapes=(f32[8]) "
                  "kernel={ lambda ; d:ref[f32[4]] e:ref[f32[8]]. let\n        in () }] a\n",
                  "b", {"in_specs[0] index_map takes 1 params; expected 2 (s32[], s32[])"}},
        BadModule{"KernelRefDtype", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[out_specs=(ANY) in_specs=(ANY) out_shapes=(f32[8]) "
                  "kernel={ lambda ; d:ref[bf16[8]] e:ref[f32[8]]. let\n        in () }] a\n",
                  "b", {"kernel kernel param 0 is ref[bf16[8]], expected ref[f32[8]]"}},
        BadModule{"ScratchNotARef", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[name=k in_specs=(ANY) out_specs=(ANY) "
                  "out_shapes=(f32[8]) kernel={ lambda ; d:ref[f32[8]] e:ref[f32[8]] f:f32[2]. "
                  "let\n        in () }] a\n",
                  "b", {"kernel k scratch param 2 is f32[2]; scratch buffers are refs"}},
        BadModule{"SemaphoreOutsideARef", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[in_specs=(ANY) out_specs=(ANY) out_shapes=(f32[8]) "
                  "kernel={ lambda ; d:ref[f32[8]] e:ref[f32[8]] f:sem[2]. let\n"
                  "        in () }] a\n",
                  "b", {"sem[...] is a semaphore array: only a ref holds one"}},
        BadModule{"SemaphoreOpOutsideKernels", "per_device", "a:s32[]",
                  "    _ = semaphore_wait a a\n", "a",
                  {"semaphore_wait: only allowed inside a pallas_call kernel"}},
        BadModule{"SignalOnADmaSemaphore", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[name=k in_specs=(ANY) out_specs=(ANY) "
                  "out_shapes=(f32[8]) kernel={ lambda ; d:ref[f32[8]] e:ref[f32[8]] "
                  "f:ref[sem[2]] g:ref[dma_sem[]]. let\n"
                  "          h:s32[] = constant[dtype=s32 value=(1)]\n"
                  "          _ = semaphore_signal[logical_device=False] g h\n        in () }] a\n",
                  "b", {"the semaphore (operand 0) is ref[dma_sem[]]; expected a ref of regular "
                        "semaphores"}},
        BadModule{"SemaphoreIndexCount", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[name=k in_specs=(ANY) out_specs=(ANY) "
                  "out_shapes=(f32[8]) kernel={ lambda ; d:ref[f32[8]] e:ref[f32[8]] "
                  "f:ref[sem[2]] g:ref[dma_sem[]]. let\n"
                  "          h:s32[] = constant[dtype=s32 value=(1)]\n"
                  "          _ = semaphore_wait f h\n        in () }] a\n",
                  "b", {"semaphore_wait: takes the semaphore, its indices and one s32[] count"}},
        BadModule{"DeviceAxisNotInTheMesh", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[name=k in_specs=(ANY) out_specs=(ANY) "
                  "out_shapes=(f32[8]) kernel={ lambda ; d:ref[f32[8]] e:ref[f32[8]] "
                  "f:ref[sem[2]] g:ref[dma_sem[]]. let\n"
                  "          h:s32[] = constant[dtype=s32 value=(1)]\n"
                  "          _ = semaphore_signal[device_axes=(z)] f h h h\n        in () }] a\n",
                  "b", {"device_axes names axis \"z\", not an axis of mesh {x:2, y:2}"}},
        BadModule{"CopyBetweenDtypes", "per_device", "a:f32[8]",
                  "    b:bf16[8] = pallas_call[name=k in_specs=(ANY) out_specs=(ANY) "
                  "out_shapes=(bf16[8]) kernel={ lambda ; d:ref[f32[8]] e:ref[bf16[8]] "
                  "f:ref[sem[2]] g:ref[dma_sem[]]. let\n"
                  "          h:s32[] = constant[dtype=s32 value=(0)]\n"
                  "          _ = dma_start[src_sizes=(8) dst_sizes=(8)] d h e h g\n"
                  "        in () }] a\n",
                  "b", {"dma_start: copies a f32[8] window of src into a bf16[8] window of dst"}},
        BadModule{"RemoteCopyWithoutASendSemaphore", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[name=k in_specs=(ANY) out_specs=(ANY) "
                  "out_shapes=(f32[8]) kernel={ lambda ; d:ref[f32[8]] e:ref[f32[8]] "
                  "f:ref[sem[2]] g:ref[dma_sem[]]. let\n"
                  "          h:s32[] = constant[dtype=s32 value=(0)]\n"
                  "          _ = dma_start[src_sizes=(8) dst_sizes=(8) device_axes=(x)] "
                  "d h e h g h\n"
                  "        in () }] a\n",
                  "b", {"a copy to another device needs a src_sem"}},
        BadModule{"CollectiveInAKernel", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[name=k in_specs=(ANY) out_specs=(ANY) "
                  "out_shapes=(f32[8]) kernel={ lambda ; d:ref[f32[8]] e:ref[f32[8]]. let\n"
                  "          g:s32[] = constant[dtype=s32 value=(0)]\n"
                  "          h:f32[8] = ref_load[sizes=(8)] d g\n"
                  "          i:f32[8] = psum[axes=(x)] h\n"
                  "        in () }] a\n",
                  "b", {"psum: collectives cannot run inside a pallas_call kernel"}},
        BadModule{"ProgramIdPastTheGrid", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[name=k in_specs=(ANY) out_specs=(ANY) "
                  "out_shapes=(f32[8]) kernel={ lambda ; d:ref[f32[8]] e:ref[f32[8]]. let\n"
                  "          g:s32[] = program_id[axis=0]\n        in () }] a\n",
                  "b", {"program_id: axis=0 is not an axis of the grid (rank 0)"}},
        BadModule{"KernelReturnsValues", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[name=k in_specs=(ANY) out_specs=(ANY) "
                  "out_shapes=(f32[8]) kernel={ lambda ; d:ref[f32[8]] e:ref[f32[8]]. let\n"
                  "          g:s32[] = constant[dtype=s32 value=(0)]\n        in (g) }] a\n",
                  "b", {"kernel k returns 1 values; kernels write their outputs through refs"}},
        BadModule{"RefAsAnOperand", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[in_specs=(ANY) out_specs=(ANY) out_shapes=(f32[8]) "
                  "kernel={ lambda ; d:ref[f32[8]] e:ref[f32[8]]. let\n"
                  "          f:f32[8] = neg d\n        in () }] a\n",
                  "b", {"neg: operand 0 is a ref (ref[f32[8]]); read it with ref_load first"}},
        BadModule{"WindowSizes", "per_device", "a:f32[8]",
                  "    b:f32[8] = pallas_call[in_specs=(ANY) out_specs=(ANY) out_shapes=(f32[8]) "
                  "kernel={ lambda ; d:ref[f32[8]] e:ref[f32[8]]. let\n"
                  "          c:s32[] = constant[dtype=s32 value=(0)]\n"
                  "          f:f32[9] = ref_load[sizes=(9)] d c\n        in () }] a\n",
                  "b", {"ref_load: sizes[0]=9 of operand 0 does not fit the ref's dimension 8"}},
        BadModule{"AliasTypes", "per_device", "a:f32[8]",
                  "    b:f32[4] = pallas_call[in_specs=(ANY) out_specs=(ANY) out_shapes=(f32[4]) "
                  "input_output_aliases=(0) kernel={ lambda ; d:ref[f32[8]] e:ref[f32[4]]. let\n"
                  "        in () }] a\n",
                  "b", {"output 0 (f32[4]) is aliased to operand 0 of type f32[8]"}},
        BadModule{"GatherFillBitsPastTheDType", "per_device", "a:u8[4] b:s32[2,1]",
                  "    c:u8[2] = gather[offset_dims=() collapsed_slice_dims=(0) "
                  "start_index_map=(0) slice_sizes=(1) mode=FILL_OR_DROP fill_bits=256] a b\n",
                  "c", {"gather: fill_bits=256 has bits past the 8 bits of u8"}},
        BadModule{"GatherFillBitsOfAPred", "per_device", "a:pred[4] b:s32[2,1]",
                  "    c:pred[2] = gather[offset_dims=() collapsed_slice_dims=(0) "
                  "start_index_map=(0) slice_sizes=(1) mode=FILL_OR_DROP fill_bits=2] a b\n",
                  "c", {"gather: fill_bits=2 is not a pred (0 or 1)"}},
        BadModule{"PbroadcastSourcePastAxis", "per_device", "a:f32[2]",
                  "    b:f32[2] = pbroadcast[axes=(x) source=2] a\n", "b",
                  {"pbroadcast: source 2 is out of range for axis size 2"}}),
    [](const ::testing::TestParamInfo<BadModule>& info) { return info.param.name; });

// The edges of those ranges are accepted.
TEST(VerifierTest, AcceptsAttributesAtTheEdgeOfTheirType) {
  for (const std::string& body : {
           std::string("    e:f32[2] = fori_loop[lower=-2147483648 upper=2147483647 body={ "
                       "lambda ; b:s32[] c:f32[2]. let\n    in (c) }] a\n"),
           std::string("    e:f32[2] = fori_loop[lower=2147483647 upper=-2147483648 body={ "
                       "lambda ; b:s32[] c:f32[2]. let\n    in (c) }] a\n"),
           // Truncation toward zero, as convert_element_type does.
           std::string("    b:s32[3] = constant[dtype=s32 shape=(3) "
                       "value=(2147483647,-2147483648,2147483647.5)]\n"),
           std::string("    b:f32[4] = constant[dtype=f32 shape=(4) "
                       "value=(3.4028234663852886e38,-inf,inf,nan)]\n"),
           std::string("    b:bf16[3] = constant[dtype=bf16 shape=(3) "
                       "value=(-3.3895313892515355e38,inf,1e-300)]\n"),
           std::string("    b:pred[2] = constant[dtype=pred shape=(2) value=(0,1)]\n"),
           std::string("    b:s32[2147483648] = iota[dtype=s32 shape=(2147483648) dimension=0]\n"),
           std::string("    b:f32[4294967296] = iota[dtype=f32 shape=(4294967296) dimension=0]\n"),
       }) {
    std::string result = body.find(" e:") != std::string::npos ? "e" : "a";
    EXPECT_TRUE(VerifyText("per_device", "a:f32[2]", body, result).ok())
        << body << VerifyText("per_device", "a:f32[2]", body, result);
  }
}

// Enum attributes hold only the values their enum defines; a binary or text proto can carry
// other numbers (the IR text form cannot).
TEST(VerifierTest, RejectsUnknownEnumNumbers) {
  auto verify = [](const std::string& body, const std::function<void(Op&)>& edit) {
    absl::StatusOr<Module> m = ParseModule(
        "module m [view=per_device mesh={x:2} entry=main]\nfunc main = { lambda ; a:f32[2]. "
        "let\n" + body + "  in (a) }\n");
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return std::string();
    edit(*m->mutable_functions(0)->mutable_body()->mutable_ops(0));
    return std::string(VerifyModule(*m).message());
  };
  const auto seven = static_cast<DTypeProto>(77);
  EXPECT_THAT(verify("    b:f32[] = constant[dtype=f32 value=(1)]\n",
                     [&](Op& op) { op.mutable_constant()->set_dtype(seven); }),
              HasSubstr("constant: dtype=77 is not a known dtype"));
  EXPECT_THAT(verify("    b:s32[2] = iota[dtype=s32 shape=(2) dimension=0]\n",
                     [&](Op& op) { op.mutable_iota()->set_dtype(seven); }),
              HasSubstr("iota: dtype=77 is not a known dtype"));
  EXPECT_THAT(verify("    b:s32[2] = convert_element_type[new_dtype=s32] a\n",
                     [&](Op& op) { op.mutable_convert_element_type()->set_new_dtype(seven); }),
              HasSubstr("convert_element_type: new_dtype=77 is not a known dtype"));
  EXPECT_THAT(verify("    b:f32[] = dot_general[lhs_contracting_dims=(0) "
                     "rhs_contracting_dims=(0)] a a\n",
                     [&](Op& op) { op.mutable_dot_general()->set_preferred_element_type(seven); }),
              HasSubstr("dot_general: preferred_element_type=77 is not a known dtype"));
  EXPECT_THAT(verify("    b:pred[2] = compare[direction=LT] a a\n",
                     [](Op& op) {
                       op.mutable_compare()->set_direction(static_cast<ComparisonDirection>(9));
                     }),
              HasSubstr("compare: direction=9 is not a known direction"));
  // An operand of such a type.
  absl::StatusOr<Module> m = ParseModule(
      "module m [view=per_device mesh={x:2} entry=main]\nfunc main = { lambda ; a:f32[2]. let\n"
      "    b:f32[2] = neg a\n  in (b) }\n");
  ASSERT_TRUE(m.ok()) << m.status();
  m->mutable_functions(0)->mutable_body()->mutable_params(0)->mutable_type()->set_dtype(seven);
  EXPECT_THAT(std::string(VerifyModule(*m).message()), HasSubstr("neg: invalid operand type"));
}

// A per-device module "m" with an empty entry function "main", built as protos.
Module EmptyPerDeviceModule() {
  Module m;
  m.set_name("m");
  m.set_view(PER_DEVICE);
  m.set_entry("main");
  m.add_functions()->set_name("main");
  return m;
}

TEST(VerifierTest, RejectsUseBeforeDefinition) {
  Module m = EmptyPerDeviceModule();
  Op* op = m.mutable_functions(0)->mutable_body()->add_ops();
  op->set_opcode("neg");
  op->add_operands(7);
  op->add_results(0);
  *op->add_result_types() = ToProto(ShapedType{DType::kF32, {2}});
  absl::Status s = VerifyModule(m);
  EXPECT_THAT(std::string(s.message()), HasSubstr("value h is not defined before its use"));
}

// Types past the limits (ir/types.h) are refused before any size arithmetic can overflow.
TEST(VerifierTest, RejectsTypesPastTheLimits) {
  EXPECT_THAT(std::string(VerifyText("per_device", "a:f32[4611686018427387904,4]",
                                     "    b:f32[4611686018427387904,4] = neg a\n", "b")
                              .message()),
              AllOf(HasSubstr("value a: type f32[4611686018427387904,4] has more than"),
                    HasSubstr("bytes")));
  // Just past 2^48 bytes, and a product that overflows int64 only after several dims.
  EXPECT_FALSE(VerifyText("per_device", "a:pred[281474976710657]", "", "a").ok());
  EXPECT_TRUE(VerifyText("per_device", "a:pred[281474976710656]", "", "a").ok());
  EXPECT_FALSE(
      VerifyText("per_device", "a:f32[65536,65536,65536,65536]", "", "a").ok());
  std::string dims;
  for (int i = 0; i < 33; ++i) dims += i == 0 ? "1" : ",1";
  EXPECT_THAT(std::string(VerifyText("per_device", "a:f32[" + dims + "]", "", "a").message()),
              HasSubstr("has rank 33, more than 32"));
  EXPECT_THAT(std::string(VerifyText("per_device", "a:f32[-1]", "", "a").message()),
              HasSubstr("value a: type f32[-1] has a negative dimension"));
  EXPECT_THAT(std::string(VerifyText("per_device", "a:f32[2]", "    b:f32[-1] = neg a\n", "b")
                              .message()),
              HasSubstr("result b is declared f32[-1] but the shape rule gives f32[2]"));
}

// Shape arithmetic that would overflow int64 (a verified dim times a group size, attribute
// sizes, many operands) is refused by the rule that does it, naming the op and the attribute;
// before, such products wrapped (2^48 * 2^20 wraps to 0, so `pred[0]` was accepted).
TEST(VerifierTest, ShapeArithmeticNeverOverflows) {
  auto verify = [](const std::string& mesh, const std::string& view, const std::string& params,
                   const std::string& body, const std::string& result) {
    std::string text = "module m [view=" + view + " mesh=" + mesh +
                       " entry=main]\nfunc main = { lambda ; " + params + ". let\n" + body +
                       "  in (" + result + ") }\n";
    absl::StatusOr<Module> m = ParseModule(text);
    if (!m.ok()) return m.status();
    return VerifyModule(*m);
  };
  const std::string big = "pred[281474976710656]";  // 2^48 bytes, the most a type may hold
  EXPECT_THAT(std::string(verify("{x:1048576}", "per_device", "a:" + big,
                                 "    b:pred[0] = all_gather[axes=(x) axis=0 tiled=True] a\n", "b")
                              .message()),
              AllOf(HasSubstr("all_gather"), HasSubstr("axis 0 (size 281474976710656) times the "
                                                       "group size 1048576 overflows")));
  EXPECT_THAT(std::string(verify("{x:1048576}", "global", "a:" + big,
                                 "    c:pred[0] = shard_map[in_specs=(P()) out_specs=(P(x)) "
                                 "body={ lambda ; b:" + big + ". let\n    in (b) }] a\n",
                                 "c")
                              .message()),
              AllOf(HasSubstr("shard_map"),
                    HasSubstr("shard_map out_specs[0]: spec P(x) makes dim 0 of 1048576 blocks "
                              "of size 281474976710656, more than int64 holds")));
  EXPECT_THAT(std::string(verify("{x:2}", "per_device", "a:f32[0]",
                                 "    b:f32[0] = reshape[new_sizes=(4294967296,4294967296,0)] a\n",
                                 "b")
                              .message()),
              HasSubstr("reshape: new_sizes (4294967296,4294967296,0) has more elements than "
                        "int64 holds"));
  // A stride near int64's limit: one element, no overflow on the way.
  EXPECT_TRUE(verify("{x:2}", "per_device", "a:f32[4]",
                     "    b:f32[1] = slice[start_indices=(1) limit_indices=(4) "
                     "strides=(9223372036854775807)] a\n",
                     "b")
                  .ok());
  // A tiled all_to_all whose split dim is 0: the concat dim times the group size passes int64.
  EXPECT_THAT(std::string(verify("{x:1048576}", "per_device", "a:f32[0,70368744177664]",
                                 "    b:f32[0,0] = all_to_all[axes=(x) split_axis=0 concat_axis=1 "
                                 "tiled=True] a\n",
                                 "b")
                              .message()),
              HasSubstr("all_to_all: concat_axis 1 (size 70368744177664) times the axis size "
                        "1048576 overflows"));
  // 2^15 + 1 operands of 2^48 elements: the sum passes int64.
  std::string operands;
  for (int i = 0; i <= 32768; ++i) operands += " a";
  EXPECT_THAT(std::string(verify("{x:2}", "per_device", "a:" + big,
                                 "    b:pred[0] = concatenate[dimension=0]" + operands + "\n", "b")
                              .message()),
              HasSubstr("the sizes along dimension 0 overflow"));
  // Meshes past kMaxMeshDevices, and ones whose size overflows int64.
  EXPECT_THAT(std::string(verify("{x:1048576,y:2}", "per_device", "a:f32[2]", "", "a").message()),
              HasSubstr("mesh {x:1048576, y:2} has more than 1048576 devices"));
  EXPECT_THAT(
      std::string(verify("{x:4294967296,y:4294967296}", "per_device", "a:f32[2]", "", "a")
                      .message()),
      HasSubstr("has more than 1048576 devices"));
}

// Regions nested past kMaxRegionDepth are refused, not recursed into until the stack ends.
TEST(VerifierTest, RejectsRegionsNestedTooDeep) {
  auto nested = [](int depth) {
    Module m = EmptyPerDeviceModule();
    const TensorType type = ToProto(ShapedType{DType::kF32, {2}});
    const TensorType index = ToProto(ShapedType{DType::kS32, {}});
    int64_t next = 0;
    Region* r = m.mutable_functions(0)->mutable_body();
    Param* p = r->add_params();
    p->set_id(next++);
    *p->mutable_type() = type;
    for (int d = 1; d < depth; ++d) {
      Op* loop = r->add_ops();
      loop->set_opcode("fori_loop");
      loop->add_operands(r->params(r->params_size() - 1).id());
      const int64_t result = next++;
      loop->add_results(result);
      *loop->add_result_types() = type;
      r->add_results(result);
      Region* body = loop->mutable_fori_loop()->mutable_body();
      Param* i = body->add_params();
      i->set_id(next++);
      *i->mutable_type() = index;
      Param* c = body->add_params();
      c->set_id(next++);
      *c->mutable_type() = type;
      loop->mutable_fori_loop()->set_upper(1);
      r = body;
    }
    r->add_results(r->params(r->params_size() - 1).id());
    return m;
  };
  EXPECT_TRUE(VerifyModule(nested(kMaxRegionDepth)).ok()) << VerifyModule(nested(kMaxRegionDepth));
  EXPECT_THAT(std::string(VerifyModule(nested(kMaxRegionDepth + 1)).message()),
              HasSubstr("regions nested more than 64 deep"));
  EXPECT_FALSE(VerifyModule(nested(5000)).ok());
}

TEST(VerifierTest, RejectsBadHeader) {
  EXPECT_THAT(std::string(VerifyText("per_device", "a:f32[2]", "", "a",
                                     " param_shardings=(P(x),P(y))")
                              .message()),
              HasSubstr("2 param_shardings for 1 entry params"));
  EXPECT_THAT(std::string(VerifyText("per_device", "a:f32[2]", "", "a",
                                     " param_shardings=(P(q))")
                              .message()),
              HasSubstr("axis \"q\" of spec P(q) is not in mesh"));
  absl::StatusOr<Module> m =
      ParseModule("module m [view=per_device mesh={x:2} devices=(0,0) entry=main]\n"
                  "func main = { lambda ; a:f32[2]. let\n  in (a) }\n");
  ASSERT_TRUE(m.ok());
  EXPECT_THAT(std::string(VerifyModule(*m).message()), HasSubstr("mesh device ids repeat"));
}

TEST(VerifierTest, RejectsBadPositionFunctions) {
  const std::string funcs =
      "func main = { lambda ; a:f32[2]. let\n  in (a) }\n"
      "func other = { lambda ; a:f32[3]. let\n  in (a) }\n";
  auto verify = [&](const std::string& header) {
    absl::StatusOr<Module> m = ParseModule("module m [" + header + "]\n" + funcs);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? std::string(VerifyModule(*m).message()) : std::string();
  };
  EXPECT_THAT(verify("view=per_device mesh={x:2} entry=main position_functions=(main)"),
              HasSubstr("1 position_functions for a mesh of 2 positions"));
  EXPECT_THAT(verify("view=per_device mesh={x:2} entry=main position_functions=(main,nope)"),
              HasSubstr("position 1 runs function \"nope\", which is not defined"));
  EXPECT_THAT(verify("view=per_device mesh={x:2} entry=main position_functions=(main,other)"),
              HasSubstr("position 1 runs other (f32[3] -> f32[3]) but the entry main is "
                        "(f32[2] -> f32[2])"));
  EXPECT_THAT(verify("view=global mesh={x:2} entry=main position_functions=(main,main)"),
              HasSubstr("position_functions need view=per_device"));
  EXPECT_EQ(verify("view=per_device mesh={x:2} entry=main position_functions=(main,main)"), "");
}

TEST(BuilderTest, InfersTypesWithTheSameRules) {
  Mesh mesh;
  MeshAxis* axis = mesh.add_axes();
  axis->set_name("x");
  axis->set_size(4);
  FunctionBuilder b(&mesh, /*per_device=*/true);
  int64_t a = b.AddParam({DType::kBF16, {8, 3}});
  Op gather;
  gather.set_opcode("all_gather");
  gather.mutable_all_gather()->add_axes("x");
  gather.mutable_all_gather()->set_axis(1);
  absl::StatusOr<std::vector<int64_t>> r = b.AddOp(gather, {a});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(b.TypeOf((*r)[0]), (ShapedType{DType::kBF16, {8, 4, 3}}));
  Op bad;
  bad.set_opcode("add");
  absl::StatusOr<std::vector<int64_t>> e = b.AddOp(bad, {a, (*r)[0]});
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("add: operand types differ"));
}

// A while_loop's body cannot read what its cond defines, nor a cond branch what another
// branch defines (the parser's scopes refuse such text; a proto built otherwise is checked here).
TEST(VerifierTest, SiblingRegionsDoNotSeeEachOther) {
  absl::StatusOr<Module> m = ParseModule(
      "module m [view=per_device mesh={x:2,y:2} devices=(0,1,2,3) entry=main]\n"
      "func main = { lambda ; a:f32[2] b:f32[]. let\n"
      "    h:f32[2] = while_loop[cond={ lambda ; c:f32[2]. let\n"
      "          d:f32[] = reduce_sum[axes=(0)] c\n"
      "          e:pred[] = compare[direction=LT] d b\n"
      "        in (e) } body={ lambda ; f:f32[2]. let\n"
      "          g:f32[2] = mul f f\n"
      "        in (g) }] a\n"
      "  in (h) }\n");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(VerifyModule(*m).ok());
  WhileLoopAttrs* loop = m->mutable_functions(0)->mutable_body()->mutable_ops(0)->mutable_while_loop();
  // The body now reads the cond's value d: g = mul f d.
  const int64_t d = loop->cond().ops(0).results(0);
  loop->mutable_body()->mutable_ops(0)->set_operands(1, d);
  absl::Status s = VerifyModule(*m);
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("(while_loop) body"),
                                              HasSubstr("is not defined before its use")));
}

}  // namespace
}  // namespace shardjit::ir
