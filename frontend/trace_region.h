// Tracing a function into a region of the current trace (loop bodies, branches, the functions
// that transformations and custom derivatives hold), and small helpers of the code that does.
// Internal to the frontend.
#ifndef SHARDJIT_FRONTEND_TRACE_REGION_H_
#define SHARDJIT_FRONTEND_TRACE_REGION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

#include "frontend/trace_state.h"
#include "frontend/traced_function.h"
#include "ir/ir.pb.h"

namespace shardjit::internal {

// Traces `f` on parameters of `types` into `region`, which may read other values of the trace;
// false after an error (recorded on `t`; `what` names the caller in messages: a wrong number of
// arguments, an invalid result). `vmas` (empty, or one per param): the mesh axes each parameter
// varies over, for a region inside a shard_map body typed with them.
bool TraceRegion(TraceState* t, const TracedFunction& f, const std::vector<ShapedType>& types,
                 const char* what, ir::Region* region,
                 const std::vector<ir::AxisList>& vmas = {});

// The mesh axes each tracer varies over (empty outside shard_map bodies typed with them).
std::vector<ir::AxisList> VmasOf(TraceState* t, const std::vector<Tracer>& tracers);

// The trace of `args` (all valid and the trace without error), or null after recording why not.
TraceState* TraceOfArgs(const std::vector<Tracer>& args, const char* what);
std::vector<ShapedType> TypesOf(const std::vector<Tracer>& tracers);
// The tracers' value ids.
std::vector<int64_t> Ids(const std::vector<Tracer>& tracers);
// The tracers of value ids.
std::vector<Tracer> Wrap(TraceState* t, const std::vector<int64_t>& ids);
// Records `s` (if an error) against the trace; true when it is OK.
bool Check(TraceState* t, const absl::Status& s, SourceLocation loc);

}  // namespace shardjit::internal

#endif  // SHARDJIT_FRONTEND_TRACE_REGION_H_
