// The state of one trace behind the Tracers (frontend/tracer.h): the IR builder, the mesh, the
// first error and the name scopes. Internal to the frontend: the public API does not include it.
#ifndef SHARDJIT_FRONTEND_TRACE_STATE_H_
#define SHARDJIT_FRONTEND_TRACE_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "frontend/sharding.h"
#include "frontend/tracer.h"
#include "ir/builder.h"
#include "ir/ir.pb.h"

namespace shardjit {
namespace internal {

// The state of one trace: the builder, the mesh, the first error and the name scopes.
class TraceState {
 public:
  TraceState();
  ~TraceState();

  ir::FunctionBuilder& builder() { return builder_; }
  const ir::Mesh& mesh() const { return mesh_; }
  bool has_mesh() const { return has_mesh_; }
  Runtime* runtime() const { return runtime_; }
  // Sets the trace's mesh or checks that `mesh` is the one already set.
  absl::Status UseMesh(const Mesh& mesh, const std::string& what);

  // `vma`: the mesh axes the parameter varies over (in a shard_map body typed with them).
  Tracer AddParam(const ShapedType& type, ir::AxisList vma = {});
  // The tracer of builder value `id`.
  Tracer Wrap(int64_t id) { return Tracer(this, id, builder_.TypeOf(id)); }
  // Appends an op; on error records it (with the location) and returns invalid tracers.
  std::vector<Tracer> Emit(ir::Op op, const std::vector<Tracer>& operands, SourceLocation loc);
  Tracer Emit1(ir::Op op, const std::vector<Tracer>& operands, SourceLocation loc);
  // Emit for an op of `results` results: exactly that many tracers, invalid after an error.
  std::vector<Tracer> EmitN(ir::Op op, const std::vector<Tracer>& operands, size_t results,
                            SourceLocation loc);
  // A constant of `type` (every element `value`).
  Tracer Constant(double value, const ShapedType& type, SourceLocation loc);

  void RecordError(absl::Status status, SourceLocation loc);
  const absl::Status& status() const { return status_; }

  void PushScope(std::string name) { scopes_.push_back(std::move(name)); }
  void PopScope() { scopes_.pop_back(); }

 private:
  ir::Mesh mesh_;
  bool has_mesh_ = false;
  Runtime* runtime_ = nullptr;
  ir::FunctionBuilder builder_;
  absl::Status status_;
  std::vector<std::string> scopes_;
  TraceState* previous_;
};

// The trace this thread is recording, or nullptr.
TraceState* CurrentTrace();
// The trace of the first valid tracer, else the current one; records an error naming `op` and
// returns nullptr when there is none.
TraceState* TraceOf(const std::vector<Tracer>& operands, const char* op);

}  // namespace internal
}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_TRACE_STATE_H_
