// What may stop a run before it finishes: a deadline, and a token another thread cancels.
#ifndef SHARDJIT_RUNTIME_RUN_OPTIONS_H_
#define SHARDJIT_RUNTIME_RUN_OPTIONS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace shardjit::runtime {

// Cancels the runs it is given to, from any thread: devices stop at their next op, GEMMs
// between blocks of their work, and devices waiting at a collective at once; the run returns
// CancelledError. Stays cancelled until Reset.
class CancellationToken {
 public:
  void Cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // The flag cancelled() reads, for kernels to poll (base::StopSignal).
  const std::atomic<bool>* flag() const { return &cancelled_; }
  void Reset() { cancelled_.store(false, std::memory_order_release); }

  // Calls `on_cancel` from Cancel until the returned id is passed to Unsubscribe (at once if
  // already cancelled). After Unsubscribe returns, `on_cancel` is not running and will not run.
  int64_t Subscribe(std::function<void()> on_cancel);
  void Unsubscribe(int64_t id);

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  int64_t next_id_ = 0;
  std::map<int64_t, std::function<void()>> subscribers_;  // under mu_
};

struct RunOptions {
  // The run fails with DeadlineExceeded once this passes (checked before every op of every
  // device, by GEMMs between blocks, and for devices waiting at a collective by the runtime's
  // watchdog).
  absl::Time deadline = absl::InfiniteFuture();
  // Null: not cancellable.
  std::shared_ptr<CancellationToken> cancel;

  // A deadline `timeout` from now.
  static RunOptions WithTimeout(absl::Duration timeout) {
    RunOptions o;
    o.deadline = absl::Now() + timeout;
    return o;
  }
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_RUN_OPTIONS_H_
