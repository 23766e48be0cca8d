// Partitioning rules of gather and the scatters. A dimension of the operand that every window
// spans whole and no index addresses (an embedding's feature dimension) may stay sharded, as may
// the batch dimensions of a gather's indices (the tokens of an embedding lookup); the result
// takes those layouts. Everything else is replicated: each device then runs the op on its blocks.
#include <algorithm>

#include "ir/indexing.h"
#include "passes/spmd/rules_internal.h"

namespace shardjit::passes::spmd::internal {
namespace {

using Dims = std::vector<int64_t>;

std::vector<Strategy> GatherRule(const OpView& view) {
  const ir::GatherAttrs& a = view.op->gather();
  const ir::ShapedType& x = view.operand_types[0];
  const ir::ShapedType& indices = view.operand_types[1];
  const int64_t out_rank = view.result_types[0].rank();
  const Dims offset = ToDims(a.offset_dims()), index_map = ToDims(a.start_index_map());
  const Dims indices_batching = ToDims(a.start_indices_batching_dims());
  const Dims window =
      ir::WindowDims(x.rank(), a.collapsed_slice_dims(), a.operand_batching_dims());
  // Per result dim: the operand dim (>= 0) or indices dim (-1 - i) that may share its layout;
  // kNone for a dim that must be replicated.
  constexpr int64_t kNone = INT64_MIN;
  Dims source(out_rank, kNone);
  for (int64_t d = 0, j = 0, b = 0; d < out_rank; ++d) {
    if (Contains(offset, d)) {
      const int64_t w = window[j++];
      if (!Contains(index_map, w) && a.slice_sizes(w) == x.dims[w]) source[d] = w;
    } else {
      if (!Contains(indices_batching, b)) source[d] = -1 - b;
      ++b;
    }
  }
  // The result layout operand i's layout gives.
  auto from_operand = [&](int i, const Spec& s) -> std::optional<Spec> {
    if (i > 1) return std::nullopt;
    Spec r = Replicated(out_rank);
    for (int64_t d = 0; d < out_rank; ++d) {
      if (i == 0 && source[d] >= 0) r.dims[d] = s.dims[source[d]];
      if (i == 1 && source[d] != kNone && source[d] < 0) r.dims[d] = s.dims[-1 - source[d]];
    }
    return r;
  };
  auto for_result = [&](const Spec& want) {
    Strategy st;
    Spec r = Replicated(out_rank), operand = Replicated(x.rank());
    Spec index_spec = Replicated(indices.rank());
    for (int64_t d = 0; d < out_rank; ++d) {
      if (source[d] == kNone) continue;
      r.dims[d] = want.dims[d];
      (source[d] >= 0 ? operand.dims[source[d]] : index_spec.dims[-1 - source[d]]) = want.dims[d];
    }
    st.operands = {operand, index_spec};
    st.results = {r};
    return st;
  };
  std::vector<Strategy> out = FromResultLayouts(view, from_operand, for_result);
  // Both operands' layouts at once (a sharded table looked up by sharded tokens), when they
  // use different mesh axes.
  if (view.operand_specs[0] && view.operand_specs[1]) {
    const Spec a = *from_operand(0, *view.operand_specs[0]);
    const Spec b = *from_operand(1, *view.operand_specs[1]);
    Spec both = a;
    AxisList used = a.Axes();
    bool disjoint = true;
    for (int64_t d = 0; d < out_rank; ++d) {
      if (b.dims[d].empty()) continue;
      for (const std::string& axis : b.dims[d]) {
        disjoint = disjoint && std::find(used.begin(), used.end(), axis) == used.end();
      }
      if (!a.dims[d].empty()) disjoint = false;
      both.dims[d] = b.dims[d];
    }
    if (disjoint) out.push_back(for_result(both));
  }
  return out;
}

std::vector<Strategy> ScatterRule(const OpView& view) {
  const ir::ScatterAttrs& a = view.op->scatter();
  const ir::ShapedType& x = view.operand_types[0];
  const ir::ShapedType& updates = view.operand_types[2];
  const Dims update_window = ToDims(a.update_window_dims());
  const Dims index_map = ToDims(a.scatter_dims_to_operand_dims());
  const Dims window =
      ir::WindowDims(x.rank(), a.inserted_window_dims(), a.operand_batching_dims());
  // Per operand dim that may stay sharded: its dim in the updates; -1 elsewhere.
  Dims update_dim(x.rank(), -1);
  for (size_t j = 0; j < window.size(); ++j) {
    const int64_t w = window[j];
    if (!Contains(index_map, w) && updates.dims[update_window[j]] == x.dims[w]) {
      update_dim[w] = update_window[j];
    }
  }
  auto kept = [&](const Spec& s, bool from_updates) {
    Spec r = Replicated(x.rank());
    for (int64_t d = 0; d < x.rank(); ++d) {
      if (update_dim[d] >= 0) r.dims[d] = s.dims[from_updates ? update_dim[d] : d];
    }
    return r;
  };
  return FromResultLayouts(
      view,
      [&](int i, const Spec& s) -> std::optional<Spec> {
        if (i == 1) return std::nullopt;
        return kept(s, i == 2);
      },
      [&](const Spec& want) {
        const Spec r = kept(want, false);
        Spec update_spec = Replicated(updates.rank());
        for (int64_t d = 0; d < x.rank(); ++d) {
          if (update_dim[d] >= 0) update_spec.dims[update_dim[d]] = r.dims[d];
        }
        Strategy st;
        st.operands = {r, Replicated(view.operand_types[1].rank()), update_spec};
        st.results = {r};
        return st;
      });
}

}  // namespace

void AddIndexingRules(RuleTable& table) {
  table[ir::Prim::kGather] = GatherRule;
  for (ir::Prim p : {ir::Prim::kScatter, ir::Prim::kScatterAdd, ir::Prim::kScatterMul,
                     ir::Prim::kScatterMin, ir::Prim::kScatterMax}) {
    table[p] = ScatterRule;
  }
}

}  // namespace shardjit::passes::spmd::internal
