// The in-process collective fabric. Devices of one run meet at a rendezvous per collective: the
// k-th collective a device starts meets the k-th of every member of its group. A collective has
// two halves: arriving (posting the operand, checked against the peers already there) and
// awaiting (waiting for the rest of the group, then reading the peers' operands directly). A
// blocking collective does both at once; an asynchronous one (`X_start` ... `X_done`, ir/async.h)
// arrives at its start, returns a future and awaits at its done, so the device computes in
// between. Posted operands stay alive (and counted in their device's memory) until every member
// of the group has read them. Devices that disagree on the op, its operand types or the group fail
// the run with an error naming them; a member that never arrives fails the run once the run has
// made no progress (no arrival, no device taking a core) for the timeout. Any failure cancels the
// run, waking every waiting device. A device that has to wait gives its core back
// (CoreSemaphore) for as long as it waits.
#ifndef SHARDJIT_RUNTIME_FABRIC_H_
#define SHARDJIT_RUNTIME_FABRIC_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/executable.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"
#include "runtime/collective_ops.h"
#include "runtime/collective_plan.h"
#include "runtime/core_semaphore.h"
#include "runtime/transport.h"

namespace shardjit::runtime {

// Shared state of one SPMD run over a mesh, devices in this process: the in-process Transport.
class RunState final : public Transport {
 public:
  // Devices of the run hold a core of `cores` (if not null) while they compute. Collectives are
  // resolved through `plan` (its mesh is the run's), which must outlive the run.
  RunState(const CollectivePlan& plan, absl::Duration timeout, CoreSemaphore* cores = nullptr);

  const ir::Mesh& mesh() const { return plan_.mesh(); }

  // Executes collective `op` for mesh position `position`: axis_index and axis_size are answered
  // locally; a blocking collective meets its group; `X_start` posts its operand and returns a
  // future; `X_done` awaits the future it is given. With a `recorder`, waits, data steps and the
  // time an asynchronous collective is in flight are recorded as spans.
  absl::StatusOr<std::vector<ir::Tensor>> Collective(
      int64_t position, const ir::Op& op, const std::vector<ir::Tensor>& operands,
      ir::Allocator* allocator, backends::SpanRecorder* recorder = nullptr) override;

  // The core of `position`: taken before its program runs and again after each wait at a
  // collective, given back during the wait and when the program ends. TakeCore returns false
  // (holding nothing) once the run is cancelled; both are no-ops without a CoreSemaphore.
  bool TakeCore(int64_t position) override;
  void GiveCore(int64_t position) override;

  // Fails the run with `status` (the first failure wins) and wakes every waiting device.
  void Cancel(const absl::Status& status) override;
  // OK while the run goes on; the failure otherwise.
  absl::Status status() const override;

 private:
  // One position's arrival at a collective.
  struct Ticket {
    int64_t seq = 0;
    int64_t position = 0;
    const ResolvedCollective* resolved = nullptr;
    const CollectiveGroup* group = nullptr;
    int64_t arrival_ns = 0;
  };
  class Pending;  // the AsyncValue of a future: a ticket not yet awaited

  struct Arrival {
    const ResolvedCollective* resolved = nullptr;  // lives as long as the run
    std::vector<ir::Tensor> operands;  // a ppermute's is handed to its target when it reads it
    std::vector<ir::ShapedType> types;  // of the operands, for agreement checks and errors
  };
  // An all-reduce result the members of a group share: each reduces a share of its elements,
  // then all return it (read-only, like a ppermute result).
  struct SharedReduction {
    ir::Tensor out;
    int64_t finished = 0;  // members whose share is written; under mu_
  };
  // All arrivals for the k-th collective of the run, by mesh position.
  struct Slot {
    std::map<int64_t, Arrival> arrivals;
    std::map<int64_t, int> readers_left;  // per group (keyed by first member)
    std::map<int64_t, std::shared_ptr<SharedReduction>> shared;  // likewise
  };

  // Posts `operands` for `position`'s next collective and checks the peers already there.
  absl::StatusOr<Ticket> Arrive(int64_t position, const ir::Op& op,
                                const std::vector<ir::Tensor>& operands, bool record);
  // Waits for the rest of the ticket's group and computes this position's result.
  absl::StatusOr<ir::Tensor> Await(const Ticket& ticket, ir::Allocator* allocator,
                                   backends::SpanRecorder* recorder);
  // Drops a ticket that will never be awaited (its run failed): its operand is released once the
  // rest of the group has read it.
  void Abandon(const Ticket& ticket);
  // Counts one reader of the ticket's group out of its slot; under mu_.
  void FinishReading(const Ticket& ticket);
  // Writes this member's share of `shared` and waits for the others' (giving the core away).
  absl::StatusOr<ir::Tensor> ReduceShared(const Ticket& ticket, const GroupOperands& inputs,
                                          SharedReduction& shared);
  int64_t DeviceOf(int64_t position) const;
  // Whether `theirs` (of `member`) is the same collective as `mine` with `group`.
  bool Agree(const Arrival& mine, const Arrival& theirs, int64_t member,
             const CollectiveGroup& group) const;
  std::string Mismatch(int64_t seq, int64_t position, const Arrival& mine, int64_t other,
                       const Arrival& theirs) const;

  const CollectivePlan& plan_;
  const absl::Duration timeout_;
  CoreSemaphore* const cores_;
  std::vector<char> holds_core_;  // per position; touched only by that position's thread
  uint64_t arrivals_ = 0;         // under mu_: progress of the run, with cores_->grants()
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> cancelled_{false};
  absl::Status status_;
  std::vector<int64_t> next_seq_;  // per mesh position
  std::map<int64_t, Slot> slots_;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_FABRIC_H_
