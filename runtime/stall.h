// Why a run stopped moving: fails a run whose parked positions wait for what will never come,
// with an error naming the devices (and processes) they wait for. Two causes: the run made no
// progress for the collective timeout (the watchdog calls FailStalled), or the process running a
// position they wait for has left (MarkGone). Reads what each parked position waits for
// (RunCore::Waiting), the rendezvous' slots and the split all-reduces' progress, all under
// RunCore::mu() (run_core.h).
#ifndef SHARDJIT_RUNTIME_STALL_H_
#define SHARDJIT_RUNTIME_STALL_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/kernel_exchange.h"
#include "runtime/rendezvous.h"
#include "runtime/run_core.h"

namespace shardjit::runtime {

class StallDiagnosis {
 public:
  StallDiagnosis(RunCore& core, const Rendezvous& rendezvous, const KernelExchange& kernels);

  // Called when the run made no progress for `waited`: fails it (DeadlineExceeded) naming a
  // device that waits and what it waits for (a psend's source, the processes of a split
  // all-reduce's missing shares, the members of its group that never arrived, or in a kernel a
  // semaphore or a peer's instance). Returns false,
  // failing nothing, when no device waits for a missing peer. Takes mu.
  bool FailStalled(absl::Duration waited);

  // Remote `positions` will send nothing more (their process left): a position waiting for one
  // of them, now or later, fails the run with `why`. Takes mu.
  void MarkGone(const std::vector<int64_t>& positions, const absl::Status& why);
  // Fails the run (with MarkGone's `why`, not posted: every process hears the goodbye itself) if
  // a position waiting for `what` waits for a position that is gone. Under mu, released while it
  // fails the run. True if it failed.
  bool FailIfWaitingOnGone(std::unique_lock<SpinMutex>& lock, const RunCore::Waiting& what);

 private:
  RunCore& core_;
  const Rendezvous& rendezvous_;
  const KernelExchange& kernels_;
  std::vector<bool> gone_;   // per position: its process sends nothing more; under mu
  absl::Status gone_status_;  // why (the first MarkGone's); under mu
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_STALL_H_
