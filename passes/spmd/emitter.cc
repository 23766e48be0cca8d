#include "passes/spmd/emitter.h"

#include "absl/status/status.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "passes/spmd/reshard.h"

namespace shardjit::passes::spmd {
namespace {

ir::Op NewOp(const char* opcode) {
  ir::Op op;
  op.set_opcode(opcode);
  return op;
}

template <typename Attrs>
void SetAxes(Attrs* attrs, const AxisList& axes) {
  for (const std::string& a : axes) attrs->add_axes(a);
}

}  // namespace

Emitter::Emitter(const ir::Mesh& mesh) : mesh_(mesh), builder_(&mesh, /*per_device=*/true) {}

void Emitter::SetOrigin(const ir::Op& op) {
  origin_.set_name_scope(op.name_scope());
  if (op.has_loc()) {
    *origin_.mutable_loc() = op.loc();
  } else {
    origin_.clear_loc();
  }
}

absl::StatusOr<std::vector<int64_t>> Emitter::Add(ir::Op op, const std::vector<int64_t>& operands) {
  op.set_name_scope(origin_.name_scope());
  if (origin_.has_loc()) *op.mutable_loc() = origin_.loc();
  op.clear_sharding();
  absl::StatusOr<std::vector<int64_t>> ids = builder_.AddOp(op, operands);
  if (!ids.ok()) {
    return absl::InternalError(
        fmt::format("spmd-partition built an invalid op: {}", ids.status().message()));
  }
  return ids;
}

absl::StatusOr<int64_t> Emitter::Add1(ir::Op op, const std::vector<int64_t>& operands) {
  absl::StatusOr<std::vector<int64_t>> ids = Add(std::move(op), operands);
  if (!ids.ok()) return ids.status();
  return (*ids)[0];
}

absl::StatusOr<int64_t> Emitter::S32(int64_t value) {
  auto it = s32_.find(value);
  if (it != s32_.end()) return it->second;
  ir::Op op = NewOp("constant");
  op.mutable_constant()->set_dtype(ir::S32);
  op.mutable_constant()->add_value(static_cast<double>(value));
  absl::StatusOr<int64_t> id = Add1(std::move(op), {});
  if (id.ok()) s32_[value] = *id;
  return id;
}

absl::StatusOr<int64_t> Emitter::BlockOffset(const AxisList& axes, int64_t block) {
  if (AxesSize(mesh_, axes) == 1) return S32(0);
  auto key = std::make_pair(axes, block);
  auto it = offsets_.find(key);
  if (it != offsets_.end()) return it->second;
  auto index_key = std::make_pair(axes, int64_t{1});
  absl::StatusOr<int64_t> index;
  if (auto found = offsets_.find(index_key); found != offsets_.end()) {
    index = found->second;
  } else {
    ir::Op op = NewOp("axis_index");
    SetAxes(op.mutable_axis(), axes);
    index = Add1(std::move(op), {});
    if (!index.ok()) return index;
    offsets_[index_key] = *index;
  }
  if (block == 1) return index;
  absl::StatusOr<int64_t> size = S32(block);
  if (!size.ok()) return size;
  absl::StatusOr<int64_t> offset = Add1(NewOp("mul"), {*index, *size});
  if (offset.ok()) offsets_[key] = *offset;
  return offset;
}

absl::StatusOr<int64_t> Emitter::Reshard(int64_t id, const ir::ShapedType& global, const Spec& from,
                                         const Spec& to) {
  for (const ReshardStep& step : PlanReshard(mesh_, from, to)) {
    const bool trivial = AxesSize(mesh_, step.axes) == 1;
    absl::StatusOr<int64_t> next = id;
    switch (step.kind) {
      case ReshardStep::Kind::kPermute: {
        const std::vector<std::pair<int64_t, int64_t>> pairs = PermutePairs(mesh_, step);
        if (trivial || pairs.empty()) break;
        ir::Op op = NewOp("ppermute");
        SetAxes(op.mutable_ppermute(), step.axes);
        for (const auto& [source, target] : pairs) {
          ir::PermutePair* pair = op.mutable_ppermute()->add_perm();
          pair->set_source(source);
          pair->set_target(target);
        }
        next = Add1(std::move(op), {id});
        break;
      }
      case ReshardStep::Kind::kAllToAll: {
        if (trivial) break;
        ir::Op op = NewOp("all_to_all");
        SetAxes(op.mutable_all_to_all(), step.axes);
        op.mutable_all_to_all()->set_split_axis(step.split_dim);
        op.mutable_all_to_all()->set_concat_axis(step.dim);
        op.mutable_all_to_all()->set_tiled(true);
        next = Add1(std::move(op), {id});
        break;
      }
      case ReshardStep::Kind::kAllGather: {
        if (trivial) break;
        ir::Op op = NewOp("all_gather");
        SetAxes(op.mutable_all_gather(), step.axes);
        op.mutable_all_gather()->set_axis(step.dim);
        op.mutable_all_gather()->set_tiled(true);
        next = Add1(std::move(op), {id});
        break;
      }
      case ReshardStep::Kind::kDynamicSlice: {
        const std::vector<int64_t> block = BlockDims(mesh_, step.after, global.dims);
        std::vector<AxisList> gained;
        bool moves = false;
        for (int64_t d = 0; d < step.after.rank(); ++d) {
          gained.emplace_back(step.after.dims[d].begin() + step.before.dims[d].size(),
                              step.after.dims[d].end());
          moves = moves || AxesSize(mesh_, gained.back()) > 1;
        }
        if (!moves) break;
        std::vector<int64_t> operands = {id};
        for (int64_t d = 0; d < step.after.rank(); ++d) {
          absl::StatusOr<int64_t> start = BlockOffset(gained[d], block[d]);
          if (!start.ok()) return start;
          operands.push_back(*start);
        }
        ir::Op op = NewOp("dynamic_slice");
        for (int64_t b : block) op.mutable_dynamic_slice()->add_slice_sizes(b);
        next = Add1(std::move(op), operands);
        break;
      }
    }
    if (!next.ok()) return next;
    id = *next;
  }
  return id;
}

absl::StatusOr<int64_t> Emitter::Combine(int64_t id, const std::string& collective,
                                         const AxisList& axes, int64_t scatter_dim) {
  if (AxesSize(mesh_, axes) == 1) return id;
  if (scatter_dim >= 0) {
    ir::Op op = NewOp("psum_scatter");
    SetAxes(op.mutable_psum_scatter(), axes);
    op.mutable_psum_scatter()->set_scatter_dimension(scatter_dim);
    op.mutable_psum_scatter()->set_tiled(true);
    return Add1(std::move(op), {id});
  }
  ir::Op op;
  op.set_opcode(collective);
  SetAxes(op.mutable_all_reduce(), axes);
  return Add1(std::move(op), {id});
}

void Emitter::OpenRegion(bool spmd) {
  saved_.push_back({s32_, offsets_});
  builder_.OpenRegion(spmd);
}

ir::Region Emitter::CloseRegion(const std::vector<int64_t>& results) {
  s32_ = std::move(saved_.back().s32);
  offsets_ = std::move(saved_.back().offsets);
  saved_.pop_back();
  return builder_.CloseRegion(results);
}

ir::Function Emitter::Finish(const std::string& name, const std::vector<int64_t>& results) {
  return builder_.Finish(name, results);
}

}  // namespace shardjit::passes::spmd
