// When the kernels of a running program must give up early.
#ifndef SHARDJIT_BASE_STOP_SIGNAL_H_
#define SHARDJIT_BASE_STOP_SIGNAL_H_

#include <atomic>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace shardjit::base {

// Set for each running program by the runtime: its run was cancelled or failed elsewhere
// (`stopped` set), or its deadline passed. Long kernels (GEMMs) poll Check() between blocks of
// work (a few microseconds to a millisecond each) and return its error early, their output
// unspecified: the run is failing anyway.
struct StopSignal {
  const std::atomic<bool>* stopped = nullptr;  // owned by the runtime; null: never set
  absl::Time deadline = absl::InfiniteFuture();

  // OK while the kernel may go on; else why not.
  absl::Status Check() const {
    if (stopped != nullptr && stopped->load(std::memory_order_relaxed)) {
      return absl::CancelledError("stopped: the run was cancelled or failed");
    }
    if (deadline != absl::InfiniteFuture() && absl::Now() >= deadline) {
      return absl::DeadlineExceededError("run did not finish before its deadline");
    }
    return absl::OkStatus();
  }
};

}  // namespace shardjit::base

#endif  // SHARDJIT_BASE_STOP_SIGNAL_H_
