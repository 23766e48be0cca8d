#include "frontend/trace_region.h"

#include "absl/status/status.h"
#include "fmt/format.h"

namespace shardjit::internal {

std::vector<ir::AxisList> VmasOf(TraceState* t, const std::vector<Tracer>& tracers) {
  std::vector<ir::AxisList> out;
  for (const Tracer& x : tracers) out.push_back(t->builder().VmaOf(x.id()));
  return out;
}

// The trace of `args` (all valid), or null after recording why not.
TraceState* TraceOfArgs(const std::vector<Tracer>& args, const char* what) {
  TraceState* t = TraceOf(args, what);
  if (t == nullptr) return nullptr;
  for (const Tracer& a : args) {
    if (!a.valid()) return nullptr;
  }
  return t->status().ok() ? t : nullptr;
}

std::vector<ShapedType> TypesOf(const std::vector<Tracer>& tracers) {
  std::vector<ShapedType> types;
  for (const Tracer& x : tracers) types.push_back(x.type());
  return types;
}

std::vector<int64_t> Ids(const std::vector<Tracer>& tracers) {
  std::vector<int64_t> ids;
  for (const Tracer& x : tracers) ids.push_back(x.id());
  return ids;
}

std::vector<Tracer> Wrap(TraceState* t, const std::vector<int64_t>& ids) {
  std::vector<Tracer> out;
  for (int64_t id : ids) out.push_back(t->Wrap(id));
  return out;
}

// Records `s` (if an error) against the trace; true when it is OK.
bool Check(TraceState* t, const absl::Status& s, SourceLocation loc) {
  if (s.ok()) return true;
  t->RecordError(s, loc);
  return false;
}

bool TraceRegion(TraceState* t, const TracedFunction& f, const std::vector<ShapedType>& types,
                 const char* what, ir::Region* region,
                 const std::vector<ir::AxisList>& vmas) {
  if (f.arity >= 0 && static_cast<size_t>(f.arity) != types.size()) {
    t->RecordError(absl::InvalidArgumentError(fmt::format(
                       "{}: the function takes {} arguments, got {}", what, f.arity, types.size())),
                   SourceLocation());
    return false;
  }
  t->builder().OpenRegion(/*spmd=*/false);
  std::vector<Tracer> params;
  for (size_t i = 0; i < types.size(); ++i) {
    params.push_back(t->AddParam(types[i], i < vmas.size() ? vmas[i] : ir::AxisList()));
  }
  std::vector<Tracer> results = f.fn(params);
  std::vector<int64_t> ids;
  for (const Tracer& r : results) ids.push_back(r.valid() ? r.id() : -1);
  *region = t->builder().CloseRegion(ids);
  if (!t->status().ok()) return false;
  for (const Tracer& r : results) {
    if (!r.valid()) {
      t->RecordError(absl::InvalidArgumentError(
                         fmt::format("{}: the function returned an invalid tracer", what)),
                     SourceLocation());
      return false;
    }
  }
  return true;
}

}  // namespace shardjit::internal
