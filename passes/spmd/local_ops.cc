#include "passes/spmd/local_ops.h"

#include "base/status_macros.h"
#include "ir/prim.h"
#include "passes/spmd/collectives.h"

namespace shardjit::passes::spmd {
namespace {

using Ids = std::vector<int64_t>;

template <typename F>
void SetAll(F* field, const std::vector<int64_t>& values) {
  field->Clear();
  for (int64_t v : values) field->Add(v);
}

// The global op built whole (replicated), then sliced to the result's layout.
absl::StatusOr<Ids> WholeThenSlice(OpEmitter& e, const OpView& view, const Spec& result) {
  const int64_t whole = e.Emit(*view.op, {});
  RETURN_IF_ERROR(e.status());
  const ir::ShapedType& type = view.result_types[0];
  ASSIGN_OR_RETURN(int64_t block, EmitReshard(e, whole, type, Replicated(type.rank()), result));
  return Ids{block};
}

// Start indices of (update-)slices: 0 along dimensions the slice covers whole (any start is
// clamped to 0 there, and the block is the whole of the local dimension).
Ids LocalStarts(OpEmitter& e, const OpView& view, const Ids& operands, size_t first,
                const std::vector<int64_t>& covered_dims) {
  Ids out(operands.begin(), operands.begin() + first);
  for (size_t d = 0; d + first < operands.size(); ++d) {
    const bool whole = covered_dims[d] == view.operand_types[0].dims[d];
    out.push_back(whole ? e.S32(0) : operands[first + d]);
  }
  return out;
}

}  // namespace

absl::StatusOr<Ids> EmitLocalOp(OpEmitter& e, const OpView& view, const Strategy& st,
                                const Ids& operands) {
  const ir::Mesh& mesh = e.mesh();
  ir::Op op = *view.op;
  const std::vector<int64_t> block = BlockDims(mesh, st.results[0], view.result_types[0].dims);
  switch (ir::PrimOf(op)) {
    case ir::Prim::kWithShardingConstraint:
      return Ids{operands[0]};
    case ir::Prim::kConstant:
      if (op.constant().value_size() != 1 && !st.results[0].IsReplicated()) {
        return WholeThenSlice(e, view, st.results[0]);
      }
      SetAll(op.mutable_constant()->mutable_shape(), block);
      break;
    case ir::Prim::kIota:
      if (!st.results[0].dims[op.iota().dimension()].empty()) {
        return WholeThenSlice(e, view, st.results[0]);
      }
      SetAll(op.mutable_iota()->mutable_shape(), block);
      break;
    case ir::Prim::kBroadcastInDim:
      SetAll(op.mutable_broadcast_in_dim()->mutable_shape(), block);
      break;
    case ir::Prim::kReshape:
      SetAll(op.mutable_reshape()->mutable_new_sizes(), block);
      break;
    case ir::Prim::kSlice: {
      // Sliced dimensions are replicated; the others are taken whole.
      ir::SliceAttrs* a = op.mutable_slice();
      const std::vector<int64_t> in = BlockDims(mesh, st.operands[0], view.operand_types[0].dims);
      for (size_t d = 0; d < in.size(); ++d) {
        if (!st.operands[0].dims[d].empty()) a->set_limit_indices(d, in[d]);
      }
      break;
    }
    case ir::Prim::kDynamicSlice:
      SetAll(op.mutable_dynamic_slice()->mutable_slice_sizes(), block);
      return e.Add(std::move(op), LocalStarts(e, view, operands, 1, view.result_types[0].dims));
    case ir::Prim::kGather: {
      // The window dimensions a strategy keeps sharded are taken whole from each block.
      const std::vector<int64_t> in = BlockDims(mesh, st.operands[0], view.operand_types[0].dims);
      for (size_t d = 0; d < in.size(); ++d) {
        if (!st.operands[0].dims[d].empty()) op.mutable_gather()->set_slice_sizes(d, in[d]);
      }
      break;
    }
    case ir::Prim::kDynamicUpdateSlice:
      return e.Add(std::move(op), LocalStarts(e, view, operands, 2, view.operand_types[1].dims));
    default:
      break;
  }
  return e.Add(std::move(op), operands);
}

}  // namespace shardjit::passes::spmd
