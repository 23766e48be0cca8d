#include "passes/spmd/collectives.h"

#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "passes/spmd/reshard.h"

namespace shardjit::passes::spmd {
namespace {

ir::Op NewOp(const std::string& opcode) {
  ir::Op op;
  op.set_opcode(opcode);
  return op;
}

// The step's op on `id`, or `id` where the step moves nothing.
int64_t EmitStep(OpEmitter& e, int64_t id, const ir::ShapedType& global, const ReshardStep& step) {
  const ir::Mesh& mesh = e.mesh();
  const bool trivial = AxesSize(mesh, step.axes) == 1;
  switch (step.kind) {
    case ReshardStep::Kind::kPermute: {
      const std::vector<std::pair<int64_t, int64_t>> pairs = PermutePairs(mesh, step);
      if (trivial || pairs.empty()) return id;
      ir::Op op = NewOp("ppermute");
      ir::SetAxisList(step.axes, op.mutable_ppermute()->mutable_axes());
      for (const auto& [source, target] : pairs) {
        ir::PermutePair* pair = op.mutable_ppermute()->add_perm();
        pair->set_source(source);
        pair->set_target(target);
      }
      return e.Emit(std::move(op), {id});
    }
    case ReshardStep::Kind::kAllToAll: {
      if (trivial) return id;
      ir::Op op = NewOp("all_to_all");
      ir::SetAxisList(step.axes, op.mutable_all_to_all()->mutable_axes());
      op.mutable_all_to_all()->set_split_axis(step.split_dim);
      op.mutable_all_to_all()->set_concat_axis(step.dim);
      op.mutable_all_to_all()->set_tiled(true);
      return e.Emit(std::move(op), {id});
    }
    case ReshardStep::Kind::kAllGather: {
      if (trivial) return id;
      ir::Op op = NewOp("all_gather");
      ir::SetAxisList(step.axes, op.mutable_all_gather()->mutable_axes());
      op.mutable_all_gather()->set_axis(step.dim);
      op.mutable_all_gather()->set_tiled(true);
      return e.Emit(std::move(op), {id});
    }
    case ReshardStep::Kind::kDynamicSlice: {
      const std::vector<int64_t> block = BlockDims(mesh, step.after, global.dims);
      std::vector<AxisList> gained;
      bool moves = false;
      for (int64_t d = 0; d < step.after.rank(); ++d) {
        gained.emplace_back(step.after.dims[d].begin() + step.before.dims[d].size(),
                            step.after.dims[d].end());
        moves = moves || AxesSize(mesh, gained.back()) > 1;
      }
      if (!moves) return id;
      std::vector<int64_t> operands = {id};
      for (int64_t d = 0; d < step.after.rank(); ++d) {
        operands.push_back(e.BlockOffset(gained[d], block[d]));
      }
      ir::Op op = NewOp("dynamic_slice");
      for (int64_t b : block) op.mutable_dynamic_slice()->add_slice_sizes(b);
      return e.Emit(std::move(op), operands);
    }
  }
  return id;
}

}  // namespace

absl::StatusOr<int64_t> EmitReshard(OpEmitter& e, int64_t id, const ir::ShapedType& global,
                                    const Spec& from, const Spec& to) {
  for (const ReshardStep& step : PlanReshard(e.mesh(), from, to)) {
    id = EmitStep(e, id, global, step);
    RETURN_IF_ERROR(e.status());
  }
  return id;
}

absl::StatusOr<int64_t> EmitCombine(OpEmitter& e, int64_t id, const std::string& collective,
                                    const AxisList& axes, int64_t scatter_dim) {
  if (AxesSize(e.mesh(), axes) == 1) return id;
  ir::Op op = NewOp(scatter_dim >= 0 ? "psum_scatter" : collective);
  if (scatter_dim >= 0) {
    ir::SetAxisList(axes, op.mutable_psum_scatter()->mutable_axes());
    op.mutable_psum_scatter()->set_scatter_dimension(scatter_dim);
    op.mutable_psum_scatter()->set_tiled(true);
  } else {
    ir::SetAxisList(axes, op.mutable_all_reduce()->mutable_axes());
  }
  id = e.Emit(std::move(op), {id});
  RETURN_IF_ERROR(e.status());
  return id;
}

}  // namespace shardjit::passes::spmd
