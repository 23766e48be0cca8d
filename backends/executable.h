// The interface between backends and the runtime: a compiled per-device program and the hooks
// it calls back into the runtime for (memory, collectives, shard_map).
#ifndef SHARDJIT_BACKENDS_EXECUTABLE_H_
#define SHARDJIT_BACKENDS_EXECUTABLE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends {

// One timed piece of a device's work, for profiles. The views need only outlive Record().
struct Span {
  std::string_view name;      // e.g. the opcode
  std::string_view category;  // "kernel", "collective", "wait", "compile", "control"
  int64_t start_ns = 0;       // on SpanClockNs()
  int64_t duration_ns = 0;
  std::string_view name_scope;  // the op's name scope, if any
};

// Receives the spans of one device; implemented by the runtime's profiler. Thread-safe.
class SpanRecorder {
 public:
  virtual ~SpanRecorder() = default;
  virtual void Record(const Span& span) = 0;
};

// The clock of spans: steady, in nanoseconds.
inline int64_t SpanClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The recorder of the program running on this thread (null when not profiling), for code that
// has no DeviceContext at hand, such as kernel generation.
inline SpanRecorder*& ThreadSpanRecorder() {
  static thread_local SpanRecorder* recorder = nullptr;
  return recorder;
}

// Sets ThreadSpanRecorder() for a scope.
class ScopedThreadSpanRecorder {
 public:
  explicit ScopedThreadSpanRecorder(SpanRecorder* recorder) : saved_(ThreadSpanRecorder()) {
    ThreadSpanRecorder() = recorder;
  }
  ~ScopedThreadSpanRecorder() { ThreadSpanRecorder() = saved_; }
  ScopedThreadSpanRecorder(const ScopedThreadSpanRecorder&) = delete;
  ScopedThreadSpanRecorder& operator=(const ScopedThreadSpanRecorder&) = delete;

 private:
  SpanRecorder* saved_;
};

// What a running program needs from the device it runs on. Implemented by the runtime.
class DeviceContext {
 public:
  virtual ~DeviceContext() = default;
  // Memory for results and temporaries, accounted to this device.
  virtual ir::Allocator* allocator() = 0;
  // Runs collective `op` (psum, all_gather, axis_index, ...) for this device: meets the peers of
  // its group, then returns this device's results.
  virtual absl::StatusOr<std::vector<ir::Tensor>> RunCollective(
      const ir::Op& op, const std::vector<ir::Tensor>& operands) = 0;
  // Runs a shard_map op of a global-view program on whole (global) operands.
  virtual absl::StatusOr<std::vector<ir::Tensor>> RunShardMap(
      const ir::Op& op, const std::vector<ir::Tensor>& operands) = 0;
  // Non-OK once the run was abandoned (another device failed); checked between ops.
  virtual absl::Status Cancelled() = 0;
  // Where this device's spans go; null when the runtime does not profile.
  virtual SpanRecorder* profiler() { return nullptr; }
};

// A program compiled for one device.
class Executable {
 public:
  virtual ~Executable() = default;
  virtual absl::StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>& args,
                                                      DeviceContext& device) const = 0;
  // Backend name for profiles and logs, e.g. "reference".
  virtual std::string backend() const = 0;
  // The function it runs, whose ops are the ones handed to DeviceContext::RunCollective (so the
  // runtime can resolve them ahead of a run); null if the backend keeps none.
  virtual const ir::Function* function() const { return nullptr; }
};

}  // namespace shardjit::backends

#endif  // SHARDJIT_BACKENDS_EXECUTABLE_H_
