#include "ir/builder.h"

#include <algorithm>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/collective_groups.h"
#include "ir/prim.h"
#include "ir/primitive.h"
#include "ir/regions.h"
#include "ir/verifier.h"

namespace shardjit::ir {

FunctionBuilder::FunctionBuilder(const Mesh* mesh, bool per_device) : mesh_(mesh) {
  open_.emplace_back();
  spmd_.push_back(per_device);
  kernel_.push_back(-1);
  check_vma_.push_back(false);
  pvarys_.emplace_back();
}

int64_t FunctionBuilder::AddParam(const ShapedType& type, AxisList vma) {
  int64_t id = next_id_++;
  Param* p = open_.back().add_params();
  p->set_id(id);
  *p->mutable_type() = ToProto(type);
  types_[id] = type;
  if (!vma.empty()) vma_[id] = Union(vma, {});
  return id;
}

const AxisList& FunctionBuilder::VmaOf(int64_t id) const {
  static const AxisList* const kNone = new AxisList();
  auto it = vma_.find(id);
  return it == vma_.end() ? *kNone : it->second;
}

AxisList FunctionBuilder::Union(const AxisList& a, const AxisList& b) const {
  AxisList out;
  auto has = [](const AxisList& list, const std::string& name) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  const Mesh* m = mesh();
  for (int i = 0; m != nullptr && i < m->axes_size(); ++i) {
    const std::string& name = m->axes(i).name();
    if (has(a, name) || has(b, name)) out.push_back(name);
  }
  for (const AxisList* list : {&a, &b}) {  // names the mesh lacks (refused by shape rules)
    for (const std::string& name : *list) {
      if (!has(out, name)) out.push_back(name);
    }
  }
  return out;
}

absl::StatusOr<int64_t> FunctionBuilder::VaryingOver(int64_t id, const AxisList& axes) {
  AxisList missing;
  const AxisList& have = VmaOf(id);
  for (const std::string& a : axes) {
    if (std::find(have.begin(), have.end(), a) == have.end()) missing.push_back(a);
  }
  if (missing.empty()) return id;
  return Pvary(id, Union(missing, {}));
}

absl::StatusOr<int64_t> FunctionBuilder::Pvary(int64_t id, const AxisList& axes) {
  const std::string key = fmt::format("{}:{}", id, fmt::join(axes, ","));
  auto it = pvarys_.back().find(key);
  if (it != pvarys_.back().end()) return it->second;
  Op op;
  op.set_opcode("pvary");
  for (const std::string& a : axes) op.mutable_axis()->add_axes(a);
  ASSIGN_OR_RETURN(std::vector<int64_t> out, AddOp(std::move(op), {id}));
  pvarys_.back()[key] = out[0];
  return out[0];
}

absl::Status FunctionBuilder::TypeOperands(Op& op, std::vector<int64_t>& operands) {
  // An async start is typed as its blocking collective.
  const Prim prim = IsAsyncStart(PrimOf(op)) ? AsyncBlocking(PrimOf(op)) : PrimOf(op);
  if (prim == Prim::kPvary || !Regions(op).empty()) return absl::OkStatus();
  if (IsCollective(prim)) {
    // The collective's own errors (an unknown axis, ...) before any pvary of its operands.
    std::vector<ShapedType> types;
    for (int64_t id : operands) types.push_back(types_.at(id));
    ShapeContext ctx{mesh(), spmd_.back(), nullptr, kernel_.back(), named_axes()};
    RETURN_IF_ERROR(InferResultTypes(ctx, types, op).status());
    const AxisList axes = CollectiveAxes(op);
    const bool reduction = prim == Prim::kPsum || prim == Prim::kPmean ||
                           prim == Prim::kPmax || prim == Prim::kPmin;
    if (reduction && !CollectiveAxisGroups(op).empty()) {
      return absl::UnimplementedError(fmt::format(
          "{}: axis_index_groups are not supported in a shard_map body typed with varying "
          "manual axes (as in JAX); pass check_vma=false to shard_map", op.opcode()));
    }
    if (prim == Prim::kPsum || prim == Prim::kPmean) op.mutable_all_reduce()->set_invariant(true);
    for (int64_t& id : operands) {  // the collective acts over its axes: operands vary over them
      // pbroadcast takes no pvary: as in JAX, its operand must already vary over its axes.
      if (prim == Prim::kPbroadcast && Union(VmaOf(id), axes).size() != VmaOf(id).size()) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: Collective pbroadcast must be applied to a device-varying type, but got {{{}}} "
            "for collective acting over axis name ({}). Pass check_vma=false to shard_map to "
            "skip this check",
            op.opcode(), fmt::join(VmaOf(id), ","), fmt::join(axes, ",")));
      }
      if (!types_.at(id).future) {
        ASSIGN_OR_RETURN(id, VaryingOver(id, axes));
      }
    }
    return absl::OkStatus();
  }
  AxisList want;  // what every operand of an ordinary op must vary over: the union
  for (int64_t id : operands) want = Union(want, VmaOf(id));
  for (int64_t& id : operands) {
    ASSIGN_OR_RETURN(id, VaryingOver(id, want));
  }
  return absl::OkStatus();
}

absl::Status FunctionBuilder::TypeResults(const Op& op, const std::vector<int64_t>& operands,
                                          const std::vector<int64_t>& results) {
  const Prim prim = IsAsyncStart(PrimOf(op)) ? AsyncBlocking(PrimOf(op)) : PrimOf(op);
  AxisList all;  // every operand's axes
  for (int64_t id : operands) all = Union(all, VmaOf(id));
  std::vector<AxisList> out(results.size(), all);
  const std::vector<const Region*> regions = Regions(op);
  if (IsCollective(prim)) {
    const AxisList axes = CollectiveAxes(op);
    AxisList vma = all;
    const bool gathered_invariant = prim == Prim::kAllGather && op.all_gather().invariant();
    if (prim == Prim::kPsum || prim == Prim::kPmean || prim == Prim::kPmax ||
        prim == Prim::kPmin || gathered_invariant) {
      AxisList kept;
      for (const std::string& a : vma) {
        if (std::find(axes.begin(), axes.end(), a) == axes.end()) kept.push_back(a);
      }
      vma = kept;
    } else if (prim == Prim::kAxisSize) {
      vma.clear();
    } else if (!IsAsyncDone(prim)) {  // axis_index, pvary and the collectives that keep varying
      vma = Union(vma, axes);
    }
    out.assign(results.size(), vma);
  } else if (op.has_fori_loop() || op.has_while_loop()) {
    // Each carry keeps its own axes (a varying loop condition makes every carry vary).
    const Region& body = op.has_fori_loop() ? op.fori_loop().body() : op.while_loop().body();
    AxisList cond;
    if (op.has_while_loop() && op.while_loop().cond().results_size() == 1) {
      cond = VmaOf(op.while_loop().cond().results(0));
    }
    for (int i = 0; i < body.results_size() && i < static_cast<int>(out.size()); ++i) {
      const AxisList& in = VmaOf(operands[i]);
      const AxisList& next = VmaOf(body.results(i));
      if (Union(in, next).size() != in.size()) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: the input carry component {} varies over ({}) but the corresponding output "
            "carry component varies over ({}), so the varying manual axes do not match; "
            "apply lax::pvary(..., ({})) to the initial carry value", op.opcode(), i,
            fmt::join(in, ", "), fmt::join(next, ", "), fmt::join(next, ", ")));
      }
      out[i] = Union(in, cond);
    }
  } else if (op.has_cond()) {  // result r: the index's axes and branch results r's
    for (size_t r = 0; r < out.size(); ++r) {
      out[r] = VmaOf(operands[0]);
      for (const Region* branch : regions) out[r] = Union(out[r], VmaOf(branch->results(r)));
    }
  } else if (op.has_custom_jvp_call() || op.has_custom_vjp_call() || op.has_checkpoint()) {
    for (size_t r = 0; r < out.size(); ++r) out[r] = VmaOf(regions[0]->results(r));  // fun's
  }
  for (size_t r = 0; r < results.size(); ++r) {
    if (!out[r].empty()) vma_[results[r]] = out[r];
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> FunctionBuilder::AddOp(Op op,
                                                            const std::vector<int64_t>& operands) {
  std::vector<ShapedType> operand_types;
  for (int64_t id : operands) {
    auto it = types_.find(id);
    if (it == types_.end()) {
      return absl::InvalidArgumentError(op.opcode() + ": operand is not a value of this function");
    }
    operand_types.push_back(it->second);
  }
  const bool typed = check_vma_.back();
  std::vector<int64_t> typed_operands = operands;
  if (typed) RETURN_IF_ERROR(TypeOperands(op, typed_operands));
  const std::vector<int64_t>& ids_in = typed ? typed_operands : operands;
  if (typed) {
    operand_types.clear();
    for (int64_t id : ids_in) operand_types.push_back(types_.at(id));
  }
  ShapeContext ctx{mesh(), spmd_.back(), [this](int64_t id) -> absl::StatusOr<ShapedType> {
                     auto it = types_.find(id);
                     if (it == types_.end()) return absl::InvalidArgumentError("unknown value");
                     return it->second;
                   },
                   kernel_.back(), named_axes()};
  ASSIGN_OR_RETURN(std::vector<ShapedType> results, InferResultTypes(ctx, operand_types, op));
  for (const ShapedType& t : results) {
    if (absl::Status s = CheckTypeLimits(t); !s.ok()) {
      return absl::InvalidArgumentError(fmt::format("{}: {}", op.opcode(), s.message()));
    }
  }
  op.clear_operands();
  op.clear_results();
  op.clear_result_types();
  for (int64_t id : ids_in) op.add_operands(id);
  std::vector<int64_t> ids;
  for (const ShapedType& t : results) {
    int64_t id = next_id_++;
    types_[id] = t;
    op.add_results(id);
    *op.add_result_types() = ToProto(t);
    ids.push_back(id);
  }
  if (typed) RETURN_IF_ERROR(TypeResults(op, ids_in, ids));
  *open_.back().add_ops() = std::move(op);
  return ids;
}

void FunctionBuilder::PushNamedAxis(const std::string& name, int64_t size) {
  named_axes_.emplace_back(name, size);
  if (named_axes_.size() == 1) extended_mesh_ = mesh_ != nullptr ? *mesh_ : Mesh();
  MeshAxis* axis = extended_mesh_.add_axes();
  axis->set_name(name);
  axis->set_size(size);
}

std::vector<std::string> FunctionBuilder::named_axes() const {
  std::vector<std::string> out;
  for (const auto& [name, size] : named_axes_) out.push_back(name);
  return out;
}

void FunctionBuilder::PopNamedAxis() {
  named_axes_.pop_back();
  extended_mesh_.mutable_axes()->RemoveLast();
}

void FunctionBuilder::OpenRegion(bool spmd, int kernel_grid_rank, bool check_vma) {
  open_.emplace_back();
  spmd_.push_back(spmd || spmd_.back());
  kernel_.push_back(kernel_grid_rank >= 0 ? kernel_grid_rank : kernel_.back());
  check_vma_.push_back(kernel_grid_rank < 0 && (check_vma || check_vma_.back()));
  pvarys_.emplace_back();
}

void FunctionBuilder::ReopenRegion(Region region) {
  OpenRegion(/*spmd=*/false);
  region.clear_results();
  open_.back() = std::move(region);
}

Region FunctionBuilder::CloseRegion(const std::vector<int64_t>& results) {
  Region r = std::move(open_.back());
  open_.pop_back();
  spmd_.pop_back();
  kernel_.pop_back();
  check_vma_.pop_back();
  pvarys_.pop_back();
  for (int64_t id : results) r.add_results(id);
  return r;
}

Function FunctionBuilder::Finish(const std::string& name, const std::vector<int64_t>& results) {
  Function f;
  f.set_name(name);
  *f.mutable_body() = std::move(open_.front());
  for (int64_t id : results) f.mutable_body()->add_results(id);
  CanonicalizeValueIds(f);
  return f;
}

}  // namespace shardjit::ir
