// sharding-propagation: IR text in, IR text out (the layouts as @sharding annotations).
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/sharding_propagation.h"

namespace shardjit::passes {
namespace {

using ::testing::HasSubstr;

struct Program {
  std::string mesh = "x:2,y:2";
  std::string params;
  std::string param_shardings;
  std::string result_shardings;
  std::string body;
  std::string results;
  std::string view = "global";
};

std::string Text(const Program& p) {
  int devices = 1;
  for (size_t i = 0; i < p.mesh.size(); ++i) {
    if (p.mesh[i] == ':') devices *= std::stoi(p.mesh.substr(i + 1));
  }
  std::string ids;
  for (int i = 0; i < devices; ++i) ids += (i ? "," : "") + std::to_string(i);
  return "module m [view=" + p.view + " mesh={" + p.mesh + "} devices=(" + ids +
         ") entry=main param_shardings=(" + p.param_shardings + ") result_shardings=(" +
         p.result_shardings + ")]\nfunc main = { lambda ; " + p.params + ". let\n" + p.body +
         "  in (" + p.results + ") }\n";
}

// Runs the pass on `p` and returns the printed module; `changed` receives its verdict.
std::string Propagated(const Program& p, bool* changed = nullptr, MachineModel machine = {}) {
  absl::StatusOr<ir::Module> m = ir::ParseModule(Text(p));
  EXPECT_TRUE(m.ok()) << m.status() << "\n" << Text(p);
  if (!m.ok()) return "";
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m);
  absl::StatusOr<bool> c = ShardingPropagation(machine).Run(*m);
  EXPECT_TRUE(c.ok()) << c.status();
  if (changed != nullptr && c.ok()) *changed = *c;
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m);
  return ir::PrintModule(*m);
}

// `p` with its body replaced by `body`.
Program WithBody(Program p, std::string body) {
  p.body = std::move(body);
  return p;
}

TEST(ShardingPropagationTest, SeedMatmulKeepsTheContractionSharded) {
  // x:[M,K] P(x,y) @ w:[K,N] P(x,None) -> P(x,None): contracting over y (w resharded from x to y)
  // costs as much as the notebook's variant (c) and touches the smallest blocks.
  Program p{.params = "a:bf16[2048,2048] b:bf16[2048,1024]",
            .param_shardings = "P(x,y),P(x,None)",
            .result_shardings = "P(x,None)",
            .body = "    c:bf16[2048,1024] = dot_general[lhs_contracting_dims=(1) "
                    "rhs_contracting_dims=(0) preferred_element_type=None] a b\n",
            .results = "c"};
  EXPECT_EQ(Propagated(p),
            Text(WithBody(p, "    c:bf16[2048,1024] = dot_general[lhs_contracting_dims=(1) "
                             "rhs_contracting_dims=(0) preferred_element_type=None] a b "
                             "@sharding(P(x,None))\n")));
}

TEST(ShardingPropagationTest, F32MatmulKeepsTheContractionShardedToHalveItsFlops) {
  // Gathering x over y (2 MiB) would be less to move than reducing f32 partial sums, but every
  // device would then repeat its y-neighbour's multiply-adds (2x the flops). The plan search
  // keeps the contraction sharded, reduce-scatters the partial sums over y (the result laid out
  // P((x,y),None)) and gathers them to the wanted P(x,None) at the end.
  Program p{.params = "a:bf16[2048,2048] b:bf16[2048,1024]",
            .param_shardings = "P(x,y),P(x,None)",
            .result_shardings = "P(x,None)",
            .body = "    c:f32[2048,1024] = dot_general[lhs_contracting_dims=(1) "
                    "rhs_contracting_dims=(0) preferred_element_type=f32] a b\n",
            .results = "c"};
  EXPECT_THAT(Propagated(p), HasSubstr("a b @sharding(P((x,y),None))"));
  // On a machine whose compute costs next to nothing, the plan that moves fewer bytes wins.
  EXPECT_THAT(Propagated(p, nullptr, {.flops_per_second = 1e18}),
              HasSubstr("a b @sharding(P(x,None))"));
}

TEST(ShardingPropagationTest, ElementwiseAndBroadcastsFollowTheOperands) {
  // The broadcasts take the layout of the ops that use them (the bias is sliced for free), the
  // scalar constant is replicated, the tanh and the result follow the operands.
  Program p{.params = "a:f32[8,4] b:f32[4]",
            .param_shardings = "P(x,y),P()",
            .result_shardings = "P(x,y)",
            .body = "    c:f32[8,4] = broadcast_in_dim[shape=(8,4) broadcast_dimensions=(1)] b\n"
                    "    d:f32[8,4] = add a c\n"
                    "    e:f32[] = constant[dtype=f32 value=(2)]\n"
                    "    f:f32[8,4] = broadcast_in_dim[shape=(8,4)] e\n"
                    "    g:f32[8,4] = mul d f\n"
                    "    h:f32[8,4] = tanh g\n",
            .results = "h"};
  EXPECT_EQ(
      Propagated(p),
      Text(WithBody(
          p, "    c:f32[8,4] = broadcast_in_dim[shape=(8,4) broadcast_dimensions=(1)] b "
             "@sharding(P(x,y))\n"
             "    d:f32[8,4] = add a c @sharding(P(x,y))\n"
             "    e:f32[] = constant[dtype=f32 value=(2)] @sharding(P())\n"
             "    f:f32[8,4] = broadcast_in_dim[shape=(8,4)] e "
             "@sharding(P(x,y))\n"
             "    g:f32[8,4] = mul d f @sharding(P(x,y))\n"
             "    h:f32[8,4] = tanh g @sharding(P(x,y))\n")));
}

TEST(ShardingPropagationTest, BroadcastsOfReplicatedOperandsTakeTheirUsersLayouts) {
  // Nothing wants a layout of the result; the replicated vector says nothing of the rows its
  // broadcast adds, so the broadcast takes the layout of the product that uses it (built
  // sharded, not whole and then sliced).
  Program p{.params = "a:f32[8,4] b:f32[4]",
            .param_shardings = "P(x,None),P()",
            .body = "    c:f32[8,4] = broadcast_in_dim[shape=(8,4) broadcast_dimensions=(1)] b\n"
                    "    d:f32[8,4] = mul a c\n"
                    "    e:f32[8] = reduce_sum[axes=(1)] d\n",
            .results = "e"};
  EXPECT_EQ(Propagated(p),
            Text(WithBody(
                p, "    c:f32[8,4] = broadcast_in_dim[shape=(8,4) broadcast_dimensions=(1)] b "
                   "@sharding(P(x,None))\n"
                   "    d:f32[8,4] = mul a c @sharding(P(x,None))\n"
                   "    e:f32[8] = reduce_sum[axes=(1)] d @sharding(P(x))\n")));
}

TEST(ShardingPropagationTest, TransposeReshapeAndReduceMapDimensions) {
  Program p{.params = "a:f32[8,12]",
            .param_shardings = "P(x,y)",
            .result_shardings = "P()",
            .body = "    b:f32[12,8] = transpose[permutation=(1,0)] a\n"
                    "    c:f32[2,6,8] = reshape[new_sizes=(2,6,8)] b\n"
                    "    d:f32[6,8] = reduce_sum[axes=(0)] c\n",
            .results = "d"};
  // The split of dim 0 (12 over y) keeps y on its major part; the reduced dim stays sharded.
  EXPECT_EQ(Propagated(p),
            Text(WithBody(p, "    b:f32[12,8] = transpose[permutation=(1,0)] a @sharding(P(y,x))\n"
                             "    c:f32[2,6,8] = reshape[new_sizes=(2,6,8)] b "
                             "@sharding(P(y,None,x))\n"
                             "    d:f32[6,8] = reduce_sum[axes=(0)] c @sharding(P(None,x))\n")));
}

TEST(ShardingPropagationTest, ReshapeThatCannotKeepALayoutReplicates) {
  // [6,4] split over x on dim 1 (blocks of 2 columns) is not contiguous once merged into [24].
  Program p{.params = "a:f32[6,4]",
            .param_shardings = "P(None,x)",
            .result_shardings = "P()",
            .body = "    b:f32[24] = reshape[new_sizes=(24)] a\n",
            .results = "b"};
  EXPECT_THAT(Propagated(p), HasSubstr("reshape[new_sizes=(24)] a @sharding(P(None))"));
}

TEST(ShardingPropagationTest, ShardingConstraintsSeedBothWays) {
  Program p{.params = "a:f32[8,8]",
            .param_shardings = "P()",
            .result_shardings = "P()",
            .body = "    b:f32[8,8] = exp a\n"
                    "    c:f32[8,8] = with_sharding_constraint[sharding=P(None,(x,y))] b\n"
                    "    d:f32[8,8] = neg c\n",
            .results = "d"};
  // exp is sliced to the constraint's layout for free; neg keeps it (gathering once at the end
  // costs the same as gathering before it, and its blocks are smaller).
  EXPECT_EQ(Propagated(p),
            Text(WithBody(p, "    b:f32[8,8] = exp a @sharding(P(None,(x,y)))\n"
                             "    c:f32[8,8] = with_sharding_constraint[sharding=P(None,(x,y))] b "
                             "@sharding(P(None,(x,y)))\n"
                             "    d:f32[8,8] = neg c @sharding(P(None,(x,y)))\n")));
}

TEST(ShardingPropagationTest, ConflictsGoToTheCheaperLayout) {
  // a and b disagree; the result wants b's layout, so a moves (one all_to_all) rather than a and
  // the result both moving.
  Program p{.params = "a:f32[8,8] b:f32[8,8]",
            .param_shardings = "P(x,None),P(None,x)",
            .result_shardings = "P(None,x)",
            .body = "    c:f32[8,8] = add a b\n",
            .results = "c"};
  EXPECT_THAT(Propagated(p), HasSubstr("add a b @sharding(P(None,x))"));
  p.result_shardings = "P(x,None)";
  EXPECT_THAT(Propagated(p), HasSubstr("add a b @sharding(P(x,None))"));
}

TEST(ShardingPropagationTest, ContractionScattersWhenTheResultWantsIt) {
  // Both operands split the contracting dim over x; the result wants rows split over x: the
  // partial sums are combined by a psum_scatter, so the annotation is the scattered layout.
  Program p{.mesh = "x:4",
            .params = "a:f32[16,32] b:f32[32,8]",
            .param_shardings = "P(None,x),P(x,None)",
            .result_shardings = "P(x,None)",
            .body = "    c:f32[16,8] = dot_general[lhs_contracting_dims=(1) "
                    "rhs_contracting_dims=(0) preferred_element_type=None] a b\n",
            .results = "c"};
  EXPECT_THAT(Propagated(p), HasSubstr("a b @sharding(P(x,None))"));
}

TEST(ShardingPropagationTest, SlicesReplicateTheDimensionsTheyCut) {
  Program p{.params = "a:f32[8,8] b:s32[]",
            .param_shardings = "P(x,y),P()",
            .result_shardings = "P(),P()",
            .body = "    c:f32[8,4] = slice[start_indices=(0,2) limit_indices=(8,6) "
                    "strides=(1,1)] a\n"
                    "    d:f32[2,8] = dynamic_slice[slice_sizes=(2,8)] a b b\n",
            .results = "c, d"};
  std::string text = Propagated(p);
  EXPECT_THAT(text, HasSubstr("strides=(1,1)] a @sharding(P(x,None))"));
  EXPECT_THAT(text, HasSubstr("a b b @sharding(P(None,y))"));
}

TEST(ShardingPropagationTest, ShardMapResultsTakeTheOutSpecsAndOperandsWantTheInSpecs) {
  // The shard_map fixes its result to its out_spec, which the bias add follows; the neg that
  // feeds it takes its in_spec.
  Program p{.params = "a:f32[4,8] w:f32[8]",
            .param_shardings = "P(),P()",
            .result_shardings = "P()",
            .body = "    b:f32[4,8] = neg a\n"
                    "    e:f32[4,8] = shard_map[in_specs=(P(x,None)) out_specs=(P(None,y)) "
                    "body={ lambda ; c:f32[2,8]. let\n"
                    "        d:f32[2,8] = psum[axes=(x)] c\n"
                    "        f:f32[2,4] = slice[start_indices=(0,0) limit_indices=(2,4) "
                    "strides=(1,1)] d\n"
                    "        g:f32[4,4] = concatenate[dimension=0] f f\n"
                    "        in (g) }] b\n"
                    "    h:f32[4,8] = broadcast_in_dim[shape=(4,8) broadcast_dimensions=(1)] w\n"
                    "    i:f32[4,8] = add e h\n",
            .results = "i"};
  std::string text = Propagated(p);
  EXPECT_THAT(text, HasSubstr("neg a @sharding(P(x,None))"));
  EXPECT_THAT(text, HasSubstr("in (g) }] c @sharding(P(None,y))"));
  EXPECT_THAT(text, HasSubstr("add h i @sharding(P(None,y))"));
}

TEST(ShardingPropagationTest, LoopCarriesKeepTheirEntryLayoutInTheBody) {
  // x = tanh(x @ w) with x split by rows: the carry keeps P(x,None) in the body, and the body's
  // ops are annotated too; w (read from outside) keeps its layout.
  Program p{.params = "a:f32[8,4] w:f32[4,4]",
            .param_shardings = "P(x,None),P()",
            .result_shardings = "P()",
            .body = "    f:f32[8,4] = fori_loop[lower=0 upper=3 body={ lambda ; b:s32[] "
                    "c:f32[8,4]. let\n"
                    "        d:f32[8,4] = dot_general[lhs_contracting_dims=(1) "
                    "rhs_contracting_dims=(0) preferred_element_type=None] c w\n"
                    "        e:f32[8,4] = tanh d\n"
                    "        in (e) }] a\n",
            .results = "f"};
  std::string text = Propagated(p);
  EXPECT_THAT(text, HasSubstr("d b @sharding(P(x,None))"));
  EXPECT_THAT(text, HasSubstr("tanh e @sharding(P(x,None))"));
  EXPECT_THAT(text, HasSubstr("in (f) }] a @sharding(P(x,None))"));
}

TEST(ShardingPropagationTest, ExpectUnchanged) {
  bool changed = true;
  // A per-device module.
  Program per_device{.params = "a:f32[4]",
                     .param_shardings = "P(x)",
                     .result_shardings = "P(x)",
                     .body = "    b:f32[4] = neg a\n",
                     .results = "b",
                     .view = "per_device"};
  EXPECT_EQ(Propagated(per_device, &changed), Text(per_device));
  EXPECT_FALSE(changed);
  // An op without a partitioning rule (a fusion, inside a loop body).
  changed = true;
  Program loop{.params = "a:f32[4]",
               .param_shardings = "P(x)",
               .result_shardings = "P(x)",
               .body = "    f:f32[4] = fori_loop[lower=0 upper=2 body={ lambda ; b:s32[] "
                       "c:f32[4]. let\n"
                       "          e:f32[4] = fusion[body={ lambda ; d:f32[4]. let\n"
                       "              in (d) }] c\n"
                       "        in (e) }] a\n",
               .results = "f"};
  EXPECT_EQ(Propagated(loop, &changed), Text(loop));
  EXPECT_FALSE(changed);
  // A module that only wraps one shard_map (lower-shard-map's job).
  changed = true;
  Program wrapper{.params = "a:f32[4]",
                  .param_shardings = "P(x)",
                  .result_shardings = "P()",
                  .body = "    c:f32[4] = shard_map[in_specs=(P(x)) out_specs=(P(x)) body={ lambda "
                          "; b:f32[2]. let\n"
                          "        in (b) }] a\n",
                  .results = "c"};
  EXPECT_EQ(Propagated(wrapper, &changed), Text(wrapper));
  EXPECT_FALSE(changed);
  // Already annotated: a second run changes nothing.
  Program p{.params = "a:f32[4]",
            .param_shardings = "P(x)",
            .result_shardings = "P(x)",
            .body = "    b:f32[4] = neg a\n",
            .results = "b"};
  std::string once = Propagated(p);
  changed = true;
  absl::StatusOr<ir::Module> m = ir::ParseModule(once);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(ShardingPropagation().Run(*m).ok());
  EXPECT_FALSE(*ShardingPropagation().Run(*m));
  EXPECT_EQ(ir::PrintModule(*m), once);
}

}  // namespace
}  // namespace shardjit::passes
