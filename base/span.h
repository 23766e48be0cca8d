// Timed spans of a device's work, for profiles: what kernels, collectives and the scheduler
// record, and the recorder they record into. No dependencies, so that the scheduler builds alone.
#ifndef SHARDJIT_BASE_SPAN_H_
#define SHARDJIT_BASE_SPAN_H_

#include <chrono>
#include <cstdint>
#include <string_view>

namespace shardjit::base {

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

}  // namespace shardjit::base

#endif  // SHARDJIT_BASE_SPAN_H_
