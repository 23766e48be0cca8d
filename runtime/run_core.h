// What every part of a run's collective fabric (runtime/fabric.h) shares: the mesh, the processes
// that run its other positions, the one lock, the run's failure, its progress count and the
// positions parked under that lock.
//
// Locking: the parts (rendezvous.h, mailbox.h, shared_reduction.h, stall.h) keep their own state
// but guard it with this one lock, `mu()`. A parked position waits on a condition that one part
// makes true (an arrival, a psend, a share of a split all-reduce) while another part diagnoses it
// (stall.h reads the rendezvous' slots and the split all-reduces' progress), so one lock lets
// every arrival wake, and every diagnosis read, without a lock order between parts. Each method
// says whether it takes `mu()` or expects it held ("under mu"). No method is called with `mu()`
// held that takes it, and nothing else is locked while it is held (SlotCache's mutex is taken only
// when a run begins and ends, without it).
#ifndef SHARDJIT_RUNTIME_RUN_CORE_H_
#define SHARDJIT_RUNTIME_RUN_CORE_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "ir/collective_groups.h"
#include "ir/ir.pb.h"
#include "runtime/remote.h"
#include "runtime/scheduler.h"
#include "runtime/spin_mutex.h"

namespace shardjit::runtime {

struct Ticket;           // rendezvous.h
struct SharedReduction;  // shared_reduction.h
struct KernelWait;       // kernel_exchange.h

class RunCore {
 public:
  // What a parked position waits for (what stall.h diagnoses when it never comes).
  struct Waiting {
    Scheduler::Task* task = nullptr;  // set by ParkUntil
    // At a collective: its ticket (in Await, or in a split all-reduce's wait); else null.
    const Ticket* ticket = nullptr;
    // In a split all-reduce: the result whose other processes' shares it waits for; else null.
    const SharedReduction* reduced = nullptr;
    // In precv: the position whose psend it waits for; else -1.
    int64_t source = -1;
    // In a kernel: its semaphore wait or the peer instance it waits for; else null.
    const KernelWait* kernel = nullptr;
  };

  explicit RunCore(const ir::Mesh& mesh);

  const ir::Mesh& mesh() const { return mesh_; }
  int64_t size() const { return size_; }  // mesh positions
  // The device id at mesh position `position`, for error messages.
  int64_t DeviceOf(int64_t position) const;

  // The processes that run the positions this one does not (null: every position is here). Set
  // before any device starts.
  RemotePeers* remote() const { return remote_; }
  void set_remote(RemotePeers* remote) { remote_ = remote; }
  // Members of `group` that run in this process.
  int LocalMembers(const ir::CollectiveGroup& group) const;

  // The lock of every part of the fabric (above).
  SpinMutex& mu() const { return mu_; }

  // Fails the run with `status` (the first failure wins) and wakes every parked position; with
  // `post`, tells the other processes (once; a failure that came from one is not posted back).
  // Takes mu.
  void Cancel(const absl::Status& status, bool post);
  bool cancelled() const { return cancelled_.load(); }
  // Set once the run fails, for kernels to poll (base::StopSignal).
  const std::atomic<bool>* stopped_flag() const { return &cancelled_; }
  // OK while the run goes on; the failure otherwise. Takes mu once the run failed.
  absl::Status status() const;
  // The failure; under mu.
  const absl::Status& failure() const { return status_; }
  // The error a position returns when the run failed with `why` while it waited.
  absl::Status CancelledError(int64_t position, const absl::Status& why) const;
  // The same with the run's failure; takes mu.
  absl::Status CancelledError(int64_t position) const {
    return CancelledError(position, status());
  }

  // Counts an arrival (at a collective, a psend, a precv, a piece received): the progress the
  // watchdog samples. Under mu.
  void CountArrival() { ++arrivals_; }
  // Arrivals so far; takes mu.
  uint64_t arrivals() const;

  // What `position` waits for while parked (task null: not parked); under mu.
  const Waiting& waiting(int64_t position) const { return waiting_[position]; }
  // Wakes `position` if it is parked; under mu.
  void Wake(int64_t position) {
    if (Scheduler::Task* task = waiting_[position].task) Scheduler::Wake(*task);
  }
  // Parks `position`, waiting for `what`, until `done()` or the run fails; under mu (released
  // while parked, held again on return).
  template <typename Done>
  void ParkUntil(std::unique_lock<SpinMutex>& lock, int64_t position, Waiting what, Done done) {
    if (done() || cancelled_) return;
    what.task = Scheduler::Current();
    waiting_[position] = what;
    while (!done() && !cancelled_) Scheduler::Park(lock);
    waiting_[position] = {};
  }

 private:
  const ir::Mesh& mesh_;
  const int64_t size_;
  RemotePeers* remote_ = nullptr;
  mutable SpinMutex mu_;
  std::atomic<bool> cancelled_{false};
  absl::Status status_;             // under mu
  uint64_t arrivals_ = 0;           // under mu
  std::vector<Waiting> waiting_;    // per mesh position; under mu
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_RUN_CORE_H_
