#include "passes/spmd/local_ops.h"

namespace shardjit::passes::spmd {
namespace {

using Ids = std::vector<int64_t>;

template <typename F>
void SetAll(F* field, const std::vector<int64_t>& values) {
  field->Clear();
  for (int64_t v : values) field->Add(v);
}

// The global op built whole (replicated), then sliced to the result's layout.
absl::StatusOr<Ids> WholeThenSlice(Emitter& e, const OpView& view, const Spec& result) {
  absl::StatusOr<int64_t> whole = e.Add1(*view.op, {});
  if (!whole.ok()) return whole.status();
  const ir::ShapedType& type = view.result_types[0];
  absl::StatusOr<int64_t> block = e.Reshard(*whole, type, Replicated(type.rank()), result);
  if (!block.ok()) return block.status();
  return Ids{*block};
}

// Start indices of (update-)slices: 0 along dimensions the slice covers whole (any start is
// clamped to 0 there, and the block is the whole of the local dimension).
absl::StatusOr<Ids> LocalStarts(Emitter& e, const OpView& view, const Ids& operands, size_t first,
                                const std::vector<int64_t>& covered_dims) {
  Ids out(operands.begin(), operands.begin() + first);
  for (size_t d = 0; d + first < operands.size(); ++d) {
    if (covered_dims[d] == view.operand_types[0].dims[d]) {
      absl::StatusOr<int64_t> zero = e.S32(0);
      if (!zero.ok()) return zero.status();
      out.push_back(*zero);
    } else {
      out.push_back(operands[first + d]);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Ids> EmitLocalOp(Emitter& e, const OpView& view, const Strategy& st,
                                const Ids& operands) {
  const ir::Mesh& mesh = e.mesh();
  ir::Op op = *view.op;
  const std::string& name = op.opcode();
  const std::vector<int64_t> block = BlockDims(mesh, st.results[0], view.result_types[0].dims);
  if (name == "with_sharding_constraint") return Ids{operands[0]};
  if (name == "constant") {
    if (op.constant().value_size() != 1 && !st.results[0].IsReplicated()) {
      return WholeThenSlice(e, view, st.results[0]);
    }
    SetAll(op.mutable_constant()->mutable_shape(), block);
  } else if (name == "iota") {
    if (!st.results[0].dims[op.iota().dimension()].empty()) {
      return WholeThenSlice(e, view, st.results[0]);
    }
    SetAll(op.mutable_iota()->mutable_shape(), block);
  } else if (name == "broadcast_in_dim") {
    SetAll(op.mutable_broadcast_in_dim()->mutable_shape(), block);
  } else if (name == "reshape") {
    SetAll(op.mutable_reshape()->mutable_new_sizes(), block);
  } else if (name == "slice") {
    // Sliced dimensions are replicated; the others are taken whole.
    ir::SliceAttrs* a = op.mutable_slice();
    const std::vector<int64_t> in = BlockDims(mesh, st.operands[0], view.operand_types[0].dims);
    for (size_t d = 0; d < in.size(); ++d) {
      if (!st.operands[0].dims[d].empty()) a->set_limit_indices(d, in[d]);
    }
  } else if (name == "dynamic_slice") {
    SetAll(op.mutable_dynamic_slice()->mutable_slice_sizes(), block);
    absl::StatusOr<Ids> local = LocalStarts(e, view, operands, 1, view.result_types[0].dims);
    if (!local.ok()) return local.status();
    return e.Add(std::move(op), *local);
  } else if (name == "dynamic_update_slice") {
    absl::StatusOr<Ids> local = LocalStarts(e, view, operands, 2, view.operand_types[1].dims);
    if (!local.ok()) return local.status();
    return e.Add(std::move(op), *local);
  }
  return e.Add(std::move(op), operands);
}

}  // namespace shardjit::passes::spmd
