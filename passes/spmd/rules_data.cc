// Partitioning rules of constants and data movement: constant, iota, with_sharding_constraint,
// broadcast_in_dim, reshape, transpose, slice, dynamic_slice, dynamic_update_slice, concatenate.
#include <numeric>

#include "passes/spmd/reshape_map.h"
#include "passes/spmd/rules_internal.h"

namespace shardjit::passes::spmd::internal {
namespace {

using Dims = std::vector<int64_t>;

Strategy Single(std::vector<Spec> operands, Spec result) {
  Strategy st;
  st.operands = std::move(operands);
  st.results = {std::move(result)};
  return st;
}

std::optional<Spec> NoOperandLayout(int, const Spec&) { return std::nullopt; }

// constant, iota: any layout (a sharded block is built locally or sliced from the whole).
std::vector<Strategy> SourceRule(const OpView& view) {
  return FromResultLayouts(view, NoOperandLayout, [](const Spec& r) { return Single({}, r); });
}

std::vector<Strategy> ShardingConstraintRule(const OpView& view) {
  Spec r = FromProto(view.op->with_sharding_constraint().sharding(), view.result_types[0].rank());
  return {Single({r}, r)};
}

// optimization_barrier: each value keeps its layout (its own where known, else the first its
// users want).
std::vector<Strategy> OptimizationBarrierRule(const OpView& view) {
  Strategy st;
  for (size_t i = 0; i < view.operand_types.size(); ++i) {
    const Spec s = view.operand_specs[i]          ? *view.operand_specs[i]
                   : !view.result_wants[i].empty() ? view.result_wants[i][0]
                                                   : Replicated(view.operand_types[i].rank());
    st.operands.push_back(s);
    st.results.push_back(s);
  }
  return {st};
}

// Operand dim i maps to result dim broadcast_dimensions[i] unless it is broadcast (size 1 to
// more): that one is replicated.
std::vector<Strategy> BroadcastInDimRule(const OpView& view) {
  const Dims bdims = ToDims(view.op->broadcast_in_dim().broadcast_dimensions());
  const Dims& in = view.operand_types[0].dims;
  const Dims& out = view.result_types[0].dims;
  auto kept = [&](size_t i) { return in[i] == out[bdims[i]]; };
  return FromResultLayouts(
      view,
      [&](int, const Spec& s) -> std::optional<Spec> {
        Spec r = Replicated(out.size());
        for (size_t i = 0; i < bdims.size(); ++i) {
          if (kept(i)) r.dims[bdims[i]] = s.dims[i];
        }
        return r;
      },
      [&](const Spec& r) {
        Spec o = Replicated(in.size());
        for (size_t i = 0; i < bdims.size(); ++i) {
          if (kept(i)) o.dims[i] = r.dims[bdims[i]];
        }
        return Single({o}, r);
      });
}

std::vector<Strategy> TransposeRule(const OpView& view) {
  const Dims perm = ToDims(view.op->transpose().permutation());
  return FromResultLayouts(
      view,
      [&](int, const Spec& s) -> std::optional<Spec> {
        Spec r = Replicated(perm.size());
        for (size_t i = 0; i < perm.size(); ++i) r.dims[i] = s.dims[perm[i]];
        return r;
      },
      [&](const Spec& r) {
        Spec o = Replicated(perm.size());
        for (size_t i = 0; i < perm.size(); ++i) o.dims[perm[i]] = r.dims[i];
        return Single({o}, r);
      });
}

// A dimension split or merged evenly keeps its layout (passes/spmd/reshape_map.h); the
// dimensions of a group that cannot are replicated on both sides.
std::vector<Strategy> ReshapeRule(const OpView& view) {
  const ir::Mesh& mesh = *view.mesh;
  const Dims& in = view.operand_types[0].dims;
  const Dims& out = view.result_types[0].dims;
  auto from_operand = [&](const Spec& s) {
    Spec o = s;
    Spec r = MapReshape(mesh, in, s, out, &o);
    return Single({o}, r);
  };
  return FromResultLayouts(
      view, [&](int, const Spec& s) -> std::optional<Spec> { return from_operand(s).results[0]; },
      [&](const Spec& r) { return from_operand(MapReshape(mesh, out, r, in, nullptr)); });
}

// Dimensions a (static or dynamic) slice cuts are replicated; the others keep their layout.
std::vector<Strategy> SliceLikeRule(const OpView& view, const Dims& cut, int64_t index_operands,
                                    int64_t data_operands) {
  return FromResultLayouts(
      view,
      [&](int i, const Spec& s) -> std::optional<Spec> {
        if (i >= data_operands) return std::nullopt;
        return ClearDims(s, cut);
      },
      [&](const Spec& r) {
        Spec kept = ClearDims(r, cut);
        std::vector<Spec> operands(data_operands, kept);
        for (int64_t i = 0; i < index_operands; ++i) operands.push_back(Replicated(0));
        return Single(std::move(operands), kept);
      });
}

std::vector<Strategy> SliceRule(const OpView& view) {
  const auto& a = view.op->slice();
  const Dims& in = view.operand_types[0].dims;
  Dims cut;
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t stride = a.strides().empty() ? 1 : a.strides(d);
    if (a.start_indices(d) != 0 || a.limit_indices(d) != in[d] || stride != 1) cut.push_back(d);
  }
  return SliceLikeRule(view, cut, 0, 1);
}

std::vector<Strategy> DynamicSliceRule(const OpView& view) {
  const Dims& in = view.operand_types[0].dims;
  const Dims& out = view.result_types[0].dims;
  Dims cut;
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != out[d]) cut.push_back(d);
  }
  return SliceLikeRule(view, cut, in.size(), 1);
}

// Operand and update share a layout; dimensions the update does not cover fully are replicated.
std::vector<Strategy> DynamicUpdateSliceRule(const OpView& view) {
  const Dims& in = view.operand_types[0].dims;
  const Dims& update = view.operand_types[1].dims;
  Dims cut;
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != update[d]) cut.push_back(d);
  }
  return SliceLikeRule(view, cut, in.size(), 2);
}

// Every operand shares the layout, the concatenated dimension replicated.
std::vector<Strategy> ConcatenateRule(const OpView& view) {
  const Dims cut = {view.op->concatenate().dimension()};
  return SliceLikeRule(view, cut, 0, view.operand_types.size());
}

}  // namespace

void AddDataMovementRules(RuleTable& table) {
  table[ir::Prim::kConstant] = SourceRule;
  table[ir::Prim::kIota] = SourceRule;
  table[ir::Prim::kWithShardingConstraint] = ShardingConstraintRule;
  table[ir::Prim::kOptimizationBarrier] = OptimizationBarrierRule;
  table[ir::Prim::kBroadcastInDim] = BroadcastInDimRule;
  table[ir::Prim::kTranspose] = TransposeRule;
  table[ir::Prim::kReshape] = ReshapeRule;
  table[ir::Prim::kSlice] = SliceRule;
  table[ir::Prim::kDynamicSlice] = DynamicSliceRule;
  table[ir::Prim::kDynamicUpdateSlice] = DynamicUpdateSliceRule;
  table[ir::Prim::kConcatenate] = ConcatenateRule;
}

}  // namespace shardjit::passes::spmd::internal
