#include "frontend/tracer.h"

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "frontend/trace_state.h"
#include "ir/fmt_absl.h"
#include "ir/types.h"

namespace shardjit {
namespace internal {
namespace {

thread_local TraceState* current_trace = nullptr;

}  // namespace

TraceState::TraceState() : builder_(&mesh_, /*per_device=*/false), previous_(current_trace) {
  current_trace = this;
}

TraceState::~TraceState() { current_trace = previous_; }

TraceState* CurrentTrace() { return current_trace; }

TraceState* TraceOf(const std::vector<Tracer>& operands, const char* op) {
  for (const Tracer& t : operands) {
    if (t.valid()) return t.state();
  }
  return current_trace;
}

absl::Status TraceState::UseMesh(const Mesh& mesh, const std::string& what) {
  ASSIGN_OR_RETURN(Runtime* runtime, mesh.runtime());
  if (!has_mesh_) {
    mesh_ = mesh.proto();
    runtime_ = runtime;
    has_mesh_ = true;
    return absl::OkStatus();
  }
  if (ir::MeshToString(mesh_) != mesh.to_string() || runtime_ != runtime ||
      mesh_.device_ids_size() != mesh.proto().device_ids_size() ||
      !std::equal(mesh_.device_ids().begin(), mesh_.device_ids().end(),
                  mesh.proto().device_ids().begin())) {
    return absl::InvalidArgumentError(
        fmt::format("{}: mesh {} differs from the mesh {} already used by this program", what,
                    mesh.to_string(), ir::MeshToString(mesh_)));
  }
  return absl::OkStatus();
}

Tracer TraceState::AddParam(const ShapedType& type, ir::AxisList vma) {
  return Tracer(this, builder_.AddParam(type, std::move(vma)), type);
}

void TraceState::RecordError(absl::Status status, SourceLocation loc) {
  if (!status_.ok()) return;
  if (loc.line() > 0) {
    status = absl::Status(status.code(), fmt::format("{} [traced at {}:{}]", status.message(),
                                                     loc.file_name(), loc.line()));
  }
  status_ = std::move(status);
}

std::vector<Tracer> TraceState::Emit(ir::Op op, const std::vector<Tracer>& operands,
                                     SourceLocation loc) {
  std::vector<int64_t> ids;
  for (const Tracer& t : operands) {
    if (!t.valid()) {
      if (status_.ok()) {
        RecordError(absl::InvalidArgumentError(
                        fmt::format("{}: an operand is not a traced value", op.opcode())),
                    loc);
      }
      return std::vector<Tracer>(1);
    }
    if (t.state() != this) {
      RecordError(absl::InvalidArgumentError(fmt::format(
                      "{}: an operand belongs to another trace (a tracer escaped its jit)",
                      op.opcode())),
                  loc);
      return std::vector<Tracer>(1);
    }
    ids.push_back(t.id());
  }
  if (!status_.ok()) return std::vector<Tracer>(1);
  if (!scopes_.empty()) op.set_name_scope(absl::StrJoin(scopes_, "/"));
  op.mutable_loc()->set_file(loc.file_name());
  op.mutable_loc()->set_line(static_cast<int32_t>(loc.line()));
  absl::StatusOr<std::vector<int64_t>> results = builder_.AddOp(std::move(op), ids);
  if (!results.ok()) {
    RecordError(results.status(), loc);
    return std::vector<Tracer>(1);
  }
  std::vector<Tracer> out;
  for (int64_t id : *results) out.push_back(Tracer(this, id, builder_.TypeOf(id)));
  return out;
}

std::vector<Tracer> TraceState::EmitN(ir::Op op, const std::vector<Tracer>& operands,
                                      size_t results, SourceLocation loc) {
  std::vector<Tracer> out = Emit(std::move(op), operands, loc);
  out.resize(results);
  return out;
}

Tracer TraceState::Emit1(ir::Op op, const std::vector<Tracer>& operands, SourceLocation loc) {
  std::vector<Tracer> out = Emit(std::move(op), operands, loc);
  return out.empty() ? Tracer() : out[0];
}

Tracer TraceState::Constant(double value, const ShapedType& type, SourceLocation loc) {
  ir::Op op;
  op.set_opcode("constant");
  auto* c = op.mutable_constant();
  c->set_dtype(ir::ToProto(type.dtype));
  for (int64_t d : type.dims) c->add_shape(d);
  c->add_value(value);
  return Emit1(std::move(op), {}, loc);
}

}  // namespace internal

NamedScope::NamedScope(std::string name) : state_(internal::CurrentTrace()) {
  if (state_ != nullptr) state_->PushScope(std::move(name));
}

NamedScope::~NamedScope() {
  if (state_ != nullptr) state_->PopScope();
}

}  // namespace shardjit
