// Rules of the ops that hold regions: shard_map, fori_loop, while_loop, cond and pallas_call.
#include "passes/spmd/rules_internal.h"

namespace shardjit::passes::spmd::internal {
namespace {

// Operands take the in_specs; results are laid out by the out_specs (axes an out_spec does not
// name are replicated: the body's values are assumed equal along them, as JAX's
// check_vma=False).
std::vector<Strategy> ShardMapRule(const OpView& view) {
  const ir::ShardMapAttrs& a = view.op->shard_map();
  Strategy st;
  for (size_t i = 0; i < view.operand_types.size(); ++i) {
    st.operands.push_back(FromProto(a.in_specs(i), view.operand_types[i].rank()));
  }
  for (size_t r = 0; r < view.result_types.size(); ++r) {
    st.results.push_back(FromProto(a.out_specs(r), view.result_types[r].rank()));
  }
  return {st};
}

// fori_loop and while_loop: each carry has one layout at entry, in the params and results of the
// loop's regions, and at exit. Candidates: every carry keeps its entry layout (else the first
// layout its users want, else replicated), or every carry takes the first layout its users want
// (else its entry layout).
std::vector<Strategy> LoopRule(const OpView& view) {
  Strategy entry, wanted;
  for (size_t i = 0; i < view.operand_types.size(); ++i) {
    const std::vector<Spec>& wants = view.result_wants[i];
    const std::optional<Spec>& in = view.operand_specs[i];
    const Spec fallback = Replicated(view.operand_types[i].rank());
    const Spec e = in ? *in : (wants.empty() ? fallback : wants[0]);
    const Spec w = wants.empty() ? e : wants[0];
    entry.operands.push_back(e);
    entry.results.push_back(e);
    wanted.operands.push_back(w);
    wanted.results.push_back(w);
  }
  if (entry.results == wanted.results) return {entry};
  return {entry, wanted};
}

// cond: the index is replicated, the branches take the operands in their layouts, and the results
// take the first layout their users want (else replicated).
std::vector<Strategy> CondRule(const OpView& view) {
  Strategy st;
  st.operands.push_back(Replicated(0));
  for (size_t i = 1; i < view.operand_types.size(); ++i) {
    const std::optional<Spec>& in = view.operand_specs[i];
    st.operands.push_back(in ? *in : Replicated(view.operand_types[i].rank()));
  }
  for (size_t r = 0; r < view.result_types.size(); ++r) {
    const std::vector<Spec>& wants = view.result_wants[r];
    st.results.push_back(wants.empty() ? Replicated(view.result_types[r].rank()) : wants[0]);
  }
  return {st};
}

// pallas_call: the kernel sees whole arrays, so every operand and result is replicated (as XLA
// runs a custom call it cannot partition); kernels run per shard inside shard_map.
std::vector<Strategy> PallasCallRule(const OpView& view) {
  Strategy st;
  for (const ir::ShapedType& t : view.operand_types) st.operands.push_back(Replicated(t.rank()));
  for (const ir::ShapedType& t : view.result_types) st.results.push_back(Replicated(t.rank()));
  return {st};
}

}  // namespace

void AddRegionRules(RuleTable& table) {
  table[ir::Prim::kPallasCall] = PallasCallRule;
  table[ir::Prim::kShardMap] = ShardMapRule;
  table[ir::Prim::kForiLoop] = LoopRule;
  table[ir::Prim::kWhileLoop] = LoopRule;
  table[ir::Prim::kCond] = CondRule;
}

}  // namespace shardjit::passes::spmd::internal
