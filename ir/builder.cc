#include "ir/builder.h"

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/primitive.h"
#include "ir/verifier.h"

namespace shardjit::ir {

FunctionBuilder::FunctionBuilder(const Mesh* mesh, bool per_device) : mesh_(mesh) {
  open_.emplace_back();
  spmd_.push_back(per_device);
  kernel_.push_back(-1);
}

int64_t FunctionBuilder::AddParam(const ShapedType& type) {
  int64_t id = next_id_++;
  Param* p = open_.back().add_params();
  p->set_id(id);
  *p->mutable_type() = ToProto(type);
  types_[id] = type;
  return id;
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
  ShapeContext ctx{mesh(), spmd_.back(), [this](int64_t id) -> absl::StatusOr<ShapedType> {
                     auto it = types_.find(id);
                     if (it == types_.end()) return absl::InvalidArgumentError("unknown value");
                     return it->second;
                   },
                   kernel_.back()};
  ASSIGN_OR_RETURN(std::vector<ShapedType> results, InferResultTypes(ctx, operand_types, op));
  for (const ShapedType& t : results) {
    if (absl::Status s = CheckTypeLimits(t); !s.ok()) {
      return absl::InvalidArgumentError(fmt::format("{}: {}", op.opcode(), s.message()));
    }
  }
  op.clear_operands();
  op.clear_results();
  op.clear_result_types();
  for (int64_t id : operands) op.add_operands(id);
  std::vector<int64_t> ids;
  for (const ShapedType& t : results) {
    int64_t id = next_id_++;
    types_[id] = t;
    op.add_results(id);
    *op.add_result_types() = ToProto(t);
    ids.push_back(id);
  }
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

void FunctionBuilder::PopNamedAxis() {
  named_axes_.pop_back();
  extended_mesh_.mutable_axes()->RemoveLast();
}

void FunctionBuilder::OpenRegion(bool spmd, int kernel_grid_rank) {
  open_.emplace_back();
  spmd_.push_back(spmd || spmd_.back());
  kernel_.push_back(kernel_grid_rank >= 0 ? kernel_grid_rank : kernel_.back());
}

Region FunctionBuilder::CloseRegion(const std::vector<int64_t>& results) {
  Region r = std::move(open_.back());
  open_.pop_back();
  spmd_.pop_back();
  kernel_.pop_back();
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
