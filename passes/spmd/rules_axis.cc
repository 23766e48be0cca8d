// Partitioning rules of the ops that work along some dimensions of their operands: sort, top_k,
// argmax/argmin, the cumulative scans, rev, pad, and reduce_prod/and/or (which have no
// collective to combine partial results). Those dimensions are replicated; every other dimension
// keeps one layout across the operands of the result's shape and the results.
#include <algorithm>

#include "passes/spmd/rules_internal.h"

namespace shardjit::passes::spmd::internal {
namespace {

using Dims = std::vector<int64_t>;

// `along`: the dimensions of the (first) operand the op works along. With `drops`, the results
// lack them (argmax, reductions); else results and operands share a rank. Operands of another
// rank (pad's padding value) are replicated.
std::vector<Strategy> AlongDims(const OpView& view, const Dims& along, bool drops) {
  const int64_t rank = view.operand_types[0].rank();
  auto result_of = [&](const Spec& operand) {
    Spec kept = ClearDims(operand, along);
    if (!drops) return kept;
    Spec r;
    for (int64_t d = 0; d < rank; ++d) {
      if (!Contains(along, d)) r.dims.push_back(kept.dims[d]);
    }
    return r;
  };
  auto operand_of = [&](const Spec& result) {
    if (!drops) return ClearDims(result, along);
    Spec o = Replicated(rank);
    for (int64_t d = 0, j = 0; d < rank; ++d) {
      if (!Contains(along, d)) o.dims[d] = result.dims[j++];
    }
    return o;
  };
  return FromResultLayouts(
      view,
      [&](int i, const Spec& s) -> std::optional<Spec> {
        if (view.operand_types[i].rank() != rank) return std::nullopt;
        return result_of(s);
      },
      [&](const Spec& r) {
        Strategy st;
        const Spec operand = operand_of(r);
        for (const ir::ShapedType& t : view.operand_types) {
          st.operands.push_back(t.rank() == rank ? operand : Replicated(t.rank()));
        }
        st.results.assign(view.result_types.size(), drops ? r : operand);
        return st;
      });
}

std::vector<Strategy> SortRule(const OpView& view) {
  return AlongDims(view, {view.op->sort().dimension()}, false);
}
std::vector<Strategy> TopKRule(const OpView& view) {
  return AlongDims(view, {view.op->top_k().axis()}, false);
}
std::vector<Strategy> ArgMinMaxRule(const OpView& view) {
  return AlongDims(view, {view.op->arg_min_max().axis()}, true);
}
std::vector<Strategy> CumulativeRule(const OpView& view) {
  return AlongDims(view, {view.op->cumulative().axis()}, false);
}
std::vector<Strategy> RevRule(const OpView& view) {
  return AlongDims(view, ToDims(view.op->rev().dimensions()), false);
}
std::vector<Strategy> ReduceWithoutCollectiveRule(const OpView& view) {
  return AlongDims(view, ToDims(view.op->reduce().axes()), true);
}
// Dimensions with any padding are replicated; the others are copied block by block.
std::vector<Strategy> PadRule(const OpView& view) {
  Dims padded;
  const auto& config = view.op->pad().padding_config();
  for (int d = 0; d < config.size(); ++d) {
    if (config[d].low() != 0 || config[d].high() != 0 || config[d].interior() != 0) {
      padded.push_back(d);
    }
  }
  return AlongDims(view, padded, false);
}

// threefry2x32: every operand and both results share one layout (an elementwise hash).
std::vector<Strategy> Threefry2x32Rule(const OpView& view) { return AlongDims(view, {}, false); }

}  // namespace

void AddAlongAxisRules(RuleTable& table) {
  table[ir::Prim::kThreefry2x32] = Threefry2x32Rule;
  table[ir::Prim::kSort] = SortRule;
  table[ir::Prim::kTopK] = TopKRule;
  table[ir::Prim::kArgmax] = ArgMinMaxRule;
  table[ir::Prim::kArgmin] = ArgMinMaxRule;
  for (ir::Prim p : {ir::Prim::kCumsum, ir::Prim::kCumprod, ir::Prim::kCummax,
                     ir::Prim::kCummin}) {
    table[p] = CumulativeRule;
  }
  table[ir::Prim::kRev] = RevRule;
  table[ir::Prim::kPad] = PadRule;
  for (ir::Prim p : {ir::Prim::kReduceProd, ir::Prim::kReduceAnd, ir::Prim::kReduceOr}) {
    table[p] = ReduceWithoutCollectiveRule;
  }
}

}  // namespace shardjit::passes::spmd::internal
