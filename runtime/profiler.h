// The runtime's profiler: a thread-safe recorder of per-device spans (kernels, collectives,
// waits at rendezvous, kernel generation), written as Chrome trace-event JSON (viewable in
// Perfetto and chrome://tracing): one process per device, one thread each.
#ifndef SHARDJIT_RUNTIME_PROFILER_H_
#define SHARDJIT_RUNTIME_PROFILER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/span.h"

namespace shardjit::runtime {

class Profiler {
 public:
  // The pseudo device of global-view programs running on the host.
  static constexpr int64_t kHost = -1;

  struct Event {
    int64_t device = 0;
    std::string name;
    std::string category;
    std::string name_scope;
    int64_t start_ns = 0;  // on base::SpanClockNs()
    int64_t duration_ns = 0;
  };

  explicit Profiler(int num_devices);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Records `span` on `device` unless paused.
  void Record(int64_t device, const base::Span& span);
  // While paused, spans are dropped (e.g. to trace only chosen runs).
  void SetPaused(bool paused) { paused_.store(paused, std::memory_order_relaxed); }
  // The recorder that tags spans with `device` (0..num_devices-1, or kHost); owned here.
  base::SpanRecorder* ForDevice(int64_t device);

  // Recorded events, ordered by device then start time.
  std::vector<Event> Events() const;
  void Clear();

  // The trace as Chrome trace-event JSON: {"traceEvents": [...]} with complete ("X") events,
  // pid = device (the host after the devices), tid 0 (tid kTransferTid, named "transfers", for
  // asynchronous collectives in flight: category "transfer"), times in microseconds since the
  // profiler started, and process_name metadata "device N".
  static constexpr int kTransferTid = 1;
  std::string ChromeTraceJson() const;
  absl::Status WriteChromeTrace(const std::string& path) const;

 private:
  class DeviceRecorder;

  const int num_devices_;
  std::atomic<bool> paused_{false};
  const int64_t origin_ns_;
  std::vector<std::unique_ptr<DeviceRecorder>> recorders_;  // devices, then the host
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

// Process k's file for a trace `path` of a job of several processes: "t.json" -> "t.pK.json"
// ("t" -> "t.pK"); `path` itself for a job of one process.
std::string ProcessTracePath(const std::string& path, int process_id, int num_processes);

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_PROFILER_H_
