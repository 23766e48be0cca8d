#include "passes/op_emitter.h"

#include "fmt/format.h"
#include "ir/async.h"
#include "ir/fmt_absl.h"

namespace shardjit::passes {

OpEmitter::OpEmitter(const ir::Mesh& mesh, std::string pass)
    : mesh_(mesh), pass_(std::move(pass)), builder_(&mesh, /*per_device=*/true), splice_(false) {}

OpEmitter::OpEmitter(const ir::Mesh& mesh, std::string pass, const TypeMap& types, int64_t* next_id)
    : mesh_(mesh),
      pass_(std::move(pass)),
      builder_(&mesh, /*per_device=*/true),
      splice_(true),
      types_(&types),
      next_id_(next_id) {
  // The ops to splice are built in a region of their own, closed by Take.
  builder_.OpenRegion(/*spmd=*/true);
}

const ir::ShapedType& OpEmitter::TypeOf(int64_t id) const {
  static const ir::ShapedType* const kNone = new ir::ShapedType();
  if (id < 0) return *kNone;  // the result of an op after an error
  if (!splice_) return builder_.TypeOf(id);
  auto it = local_.find(id);
  return it != local_.end() ? builder_.TypeOf(it->second) : types_->at(id);
}

void OpEmitter::SetOrigin(const ir::Op& op) {
  origin_.set_name_scope(op.name_scope());
  if (op.has_loc()) {
    *origin_.mutable_loc() = op.loc();
  } else {
    origin_.clear_loc();
  }
}

int64_t OpEmitter::Local(int64_t id) {
  if (!splice_) return id;
  if (auto it = local_.find(id); it != local_.end()) return it->second;
  auto type = types_->find(id);
  if (type == types_->end()) return -1;  // the builder reports it
  const int64_t local = builder_.AddParam(type->second);
  local_[id] = local;
  global_[local] = id;
  return local;
}

absl::StatusOr<std::vector<int64_t>> OpEmitter::Append(ir::Op op,
                                                       const std::vector<int64_t>& operands,
                                                       int64_t result) {
  if (!status_.ok()) return status_;
  op.set_name_scope(origin_.name_scope());
  if (origin_.has_loc()) *op.mutable_loc() = origin_.loc();
  op.clear_sharding();
  std::vector<int64_t> locals;
  for (int64_t id : operands) locals.push_back(Local(id));
  absl::StatusOr<std::vector<int64_t>> ids = builder_.AddOp(std::move(op), locals);
  if (ids.ok() && splice_ && next_id_ == nullptr && (result < 0 || ids->size() > 1)) {
    ids = absl::InvalidArgumentError("no id for a new value");
  }
  if (!ids.ok()) {
    status_ = absl::InternalError(
        fmt::format("{} built an invalid op: {}", pass_, ids.status().message()));
    return status_;
  }
  if (!splice_) return ids;
  for (size_t i = 0; i < ids->size(); ++i) {
    const int64_t global = i == 0 && result >= 0 ? result : (*next_id_)++;
    local_[global] = (*ids)[i];
    global_[(*ids)[i]] = global;
    (*ids)[i] = global;
  }
  return ids;
}

absl::StatusOr<std::vector<int64_t>> OpEmitter::Add(ir::Op op,
                                                    const std::vector<int64_t>& operands) {
  return Append(std::move(op), operands, -1);
}

int64_t OpEmitter::Emit(ir::Op op, const std::vector<int64_t>& operands, int64_t result) {
  absl::StatusOr<std::vector<int64_t>> ids = Append(std::move(op), operands, result);
  return ids.ok() && !ids->empty() ? ids->front() : -1;
}

int64_t OpEmitter::Emit(const std::string& opcode, const std::vector<int64_t>& operands,
                        int64_t result) {
  ir::Op op;
  op.set_opcode(opcode);
  return Emit(std::move(op), operands, result);
}

int64_t OpEmitter::Constant(const ir::ShapedType& type, double value, int64_t result) {
  ir::Op op;
  op.set_opcode("constant");
  ir::ConstantAttrs* c = op.mutable_constant();
  c->set_dtype(ir::ToProto(type.dtype));
  for (int64_t d : type.dims) c->add_shape(d);
  c->add_value(value);
  return Emit(std::move(op), {}, result);
}

int64_t OpEmitter::S32(int64_t value) {
  if (auto it = caches_.s32.find(value); it != caches_.s32.end()) return it->second;
  const int64_t id = Constant({ir::DType::kS32, {}}, static_cast<double>(value));
  if (id >= 0) caches_.s32[value] = id;
  return id;
}

int64_t OpEmitter::AxisIndex(const ir::AxisList& axes) {
  const auto key = std::make_pair(axes, int64_t{1});
  if (auto it = caches_.offsets.find(key); it != caches_.offsets.end()) return it->second;
  ir::Op op;
  op.set_opcode("axis_index");
  ir::SetAxisList(axes, op.mutable_axis()->mutable_axes());
  const int64_t id = Emit(std::move(op), {});
  if (id >= 0) caches_.offsets[key] = id;
  return id;
}

int64_t OpEmitter::BlockOffset(const ir::AxisList& axes, int64_t block) {
  if (ir::CombinedAxisSize(mesh_, axes).value_or(1) == 1) return S32(0);
  if (block == 1) return AxisIndex(axes);
  const auto key = std::make_pair(axes, block);
  if (auto it = caches_.offsets.find(key); it != caches_.offsets.end()) return it->second;
  const int64_t index = AxisIndex(axes);
  const int64_t offset = Emit("mul", {index, S32(block)});
  if (offset >= 0) caches_.offsets[key] = offset;
  return offset;
}

int64_t OpEmitter::Convert(int64_t x, ir::DType dtype, int64_t result) {
  ir::Op op;
  op.set_opcode("convert_element_type");
  op.mutable_convert_element_type()->set_new_dtype(ir::ToProto(dtype));
  return Emit(std::move(op), {x}, result);
}

int64_t OpEmitter::AsyncDone(const std::string& blocking, int64_t future, int64_t result) {
  return Emit(ir::AsyncDoneOpcode(blocking), {future}, result);
}

int64_t OpEmitter::AddParam(const ir::ShapedType& type) { return builder_.AddParam(type); }

void OpEmitter::OpenRegion(bool spmd) {
  saved_.push_back(caches_);
  builder_.OpenRegion(spmd);
}

ir::Region OpEmitter::CloseRegion(const std::vector<int64_t>& results) {
  caches_ = std::move(saved_.back());
  saved_.pop_back();
  return builder_.CloseRegion(results);
}

ir::Function OpEmitter::Finish(const std::string& name, const std::vector<int64_t>& results) {
  return builder_.Finish(name, results);
}

std::vector<ir::Op> OpEmitter::Take() {
  ir::Region region = builder_.CloseRegion({});
  builder_.OpenRegion(/*spmd=*/true);
  std::vector<ir::Op> ops;
  if (!status_.ok()) return ops;
  for (ir::Op& op : *region.mutable_ops()) {
    for (int64_t& id : *op.mutable_operands()) id = global_.at(id);
    for (int64_t& id : *op.mutable_results()) id = global_.at(id);
    ops.push_back(std::move(op));
  }
  return ops;
}

}  // namespace shardjit::passes
