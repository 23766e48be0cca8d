// The in-process collective fabric. Devices of one run meet at a rendezvous per collective: the
// k-th collective a device starts meets the k-th of every member of its group. A collective has
// two halves: arriving (posting the operand, checked against the peers already there) and
// awaiting (waiting for the rest of the group, then reading the peers' operands directly). A
// blocking collective does both at once; an asynchronous one (`X_start` ... `X_done`, ir/async.h)
// arrives at its start, returns a future and awaits at its done, so the device computes in
// between. Posted operands stay alive (and counted in their device's memory) until every member
// of the group has read them. Devices that disagree on the op, its operand types or the group fail
// the run with an error naming them; a member that never arrives fails the run once the run has
// made no progress (no arrival, no device taking a core) for the timeout. psend and precv do not
// meet at a rendezvous: a psend queues its operand for its target, and the k-th precv of a target
// from a source takes the k-th psend of that source to it. Any failure cancels the
// run, waking every waiting device. Devices run as tasks of a Scheduler (runtime/scheduler.h): a
// device that has to wait parks, handing its thread to another device, and the arrival that
// completes its group wakes it. The per-collective path allocates nothing once warm (slots and
// scratch buffers are recycled) and formats no strings unless it fails or records spans.
#ifndef SHARDJIT_RUNTIME_FABRIC_H_
#define SHARDJIT_RUNTIME_FABRIC_H_

#include <atomic>
#include <deque>
#include <map>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/executable.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"
#include "runtime/collective_ops.h"
#include "runtime/collective_plan.h"
#include "runtime/remote.h"
#include "runtime/scheduler.h"
#include "runtime/spin_mutex.h"
#include "runtime/transport.h"

namespace shardjit::runtime {

// Shared state of one SPMD run over a mesh, devices in this process: the in-process Transport.
// Every device of the run must run as a Scheduler task.
class RunState final : public Transport {
 public:
  // Slots of finished runs, kept by the runtime so that a run reuses the last one's buffers.
  struct SlotCache;

  // Collectives are resolved through `plan` (its mesh is the run's), which must outlive the run,
  // and reduce on `backend`'s kernels (the backend of the programs run); `cache` (optional) lends
  // recycled slots.
  RunState(const CollectivePlan& plan, const backends::Backend& backend,
           SlotCache* cache = nullptr);
  ~RunState() override;

  const ir::Mesh& mesh() const { return plan_.mesh(); }

  // Connects the run to the processes that run the mesh positions this one does not (before any
  // device starts; null: every position is here). Arrivals, psends and failures of local
  // positions are then posted to them too.
  void SetRemote(RemotePeers* remote) { remote_ = remote; }
  // What another process posted: remote position `position`'s arrival at its `seq`-th collective
  // (`resolved` from its signature; operands undefined where not sent, `types` always), a psend
  // from remote `source` to local `target`, and the failure of the run (not posted back).
  // `share`: the elements of its operand a split all-reduce's arrival holds (empty: all).
  void DeliverArrival(int64_t seq, int64_t position, const ResolvedCollective* resolved,
                      std::vector<ir::Tensor> operands, std::vector<ir::ShapedType> types,
                      const ElementRange& share = {});
  void DeliverMail(int64_t source, int64_t target, ir::Tensor x);
  // Elements `piece` of a split all-reduce's result (RemotePeers::PostReduced) from `process`,
  // held by `x` (a tensor of the result's type, or `piece.size()` elements of its dtype).
  void DeliverReduced(int process, int64_t seq, int64_t key, const ElementRange& piece,
                      const ir::Tensor& x);
  void CancelFromPeer(const absl::Status& status);
  // Remote `positions` will send nothing more (their process left): a device waiting for one of
  // them, now or later, fails the run with `why`.
  void MarkGone(const std::vector<int64_t>& positions, const absl::Status& why);

  // Executes collective `op` for mesh position `position`: axis_index and axis_size are answered
  // locally; a blocking collective meets its group; `X_start` posts its operand and returns a
  // future; `X_done` awaits the future it is given. With a `recorder`, waits, data steps and the
  // time an asynchronous collective is in flight are recorded as spans.
  absl::StatusOr<std::vector<ir::Tensor>> Collective(
      int64_t position, const ir::Op& op, const std::vector<ir::Tensor>& operands,
      ir::Allocator* allocator, base::SpanRecorder* recorder = nullptr) override;

  // Fails the run with `status` (the first failure wins) and wakes every waiting device.
  void Cancel(const absl::Status& status) override;
  // After the run: FailedPrecondition naming the first psend no precv received, else OK.
  absl::Status CheckAllReceived() const;
  // OK while the run goes on; the failure otherwise.
  absl::Status status() const override;
  // Set once the run fails, for kernels to poll (base::StopSignal).
  const std::atomic<bool>* stopped_flag() const { return &cancelled_; }

  // Arrivals at collectives so far: grows while the run makes progress.
  uint64_t arrivals() const;
  // Called when the run made no progress for `waited`: fails it (DeadlineExceeded) naming a
  // device waiting at a collective and the members of its group that never arrived. Returns
  // false, failing nothing, when no device waits for a missing peer.
  bool FailStalled(absl::Duration waited);

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
    bool present = false;
    const ResolvedCollective* resolved = nullptr;  // lives as long as the run
    std::vector<ir::Tensor> operands;  // a ppermute's is handed to its target when it reads it
    std::vector<ir::ShapedType> types;  // of the operands, for agreement checks and errors
    // A local all_gather's result, allocated at arrival so that the operands of members in
    // other processes are received into their places in it (undefined otherwise).
    ir::Tensor prepared;
    // A remote member's arrival at a split all-reduce: the elements of its operand sent (the
    // receiving process's share), which operands[0] holds; empty: all of them.
    ElementRange share;
  };
  // An all-reduce result the members of a group share: each reduces a share of its elements,
  // then all return it (read-only, like a ppermute result). Split across processes (remote.h),
  // this process's members reduce elements `mine` and the rest comes from the other processes.
  struct SharedReduction {
    ir::Tensor out;
    ElementRange mine;
    int64_t finished = 0;  // local members whose part is written; under mu_
    // Split: the other processes of the group, their shares, and the elements of each received
    // so far; under mu_.
    std::vector<int> others;
    std::vector<ElementRange> their_shares;
    std::vector<int64_t> received;
    int64_t missing = 0;  // elements of the others' shares not yet received
    const CollectiveGroup* group = nullptr;
    bool Done(int64_t members) const { return finished == members && missing == 0; }
  };
  // How a split all-reduce divides its result: process `processes[i]` of the group reduces
  // `shares[i]` (empty `processes`: not split).
  struct ProcessShares {
    std::vector<int> processes;
    std::vector<ElementRange> shares;
    // The share of `process` (empty when it is not one of them).
    ElementRange ShareOf(int process) const {
      for (size_t i = 0; i < processes.size(); ++i) {
        if (processes[i] == process) return shares[i];
      }
      return {};
    }
  };
  // All arrivals for the k-th collective of the run. Vectors are indexed by mesh position (a
  // group's entries by its first member) and keep their capacity when the slot is recycled.
  struct Slot {
    std::vector<Arrival> arrivals;
    int64_t present = 0;
    std::vector<int> readers_left;  // per group; 0: no reader counted yet
    std::vector<std::shared_ptr<SharedReduction>> shared;
    std::vector<int64_t> waiters;  // positions parked in Await on this slot
  };
  // What a parked position waits for.
  struct Waiting {
    Scheduler::Task* task = nullptr;
    const Ticket* ticket = nullptr;  // in Await: the group's arrivals; else null
    // In ReduceShared, split across processes: the shares it waits for; else null.
    const SharedReduction* reduced = nullptr;
  };

  // psend: queues `x` for each target of the pairs whose source is `position`; returns the token.
  absl::StatusOr<std::vector<ir::Tensor>> Send(int64_t position, const ir::Op& op,
                                               const ir::Tensor& x);
  // precv: the next tensor queued for `position` from its pair's source (waiting for it), or
  // zeros where `position` is no target.
  absl::StatusOr<std::vector<ir::Tensor>> Receive(int64_t position, const ir::Op& op,
                                                  ir::Allocator* allocator);
  // Posts `operands` for `position`'s next collective and checks the peers already there.
  absl::StatusOr<Ticket> Arrive(int64_t position, const ir::Op& op,
                                const std::vector<ir::Tensor>& operands, ir::Allocator* allocator,
                                bool record);
  // The result of an all_gather of `operands` over `group` from `allocator`, when members of
  // the group run in other processes and each member's block is one run of the result (so that
  // theirs can be received in place); undefined otherwise.
  ir::Tensor PrepareGatherResult(const ResolvedCollective& resolved, const CollectiveGroup& group,
                                 const std::vector<ir::Tensor>& operands,
                                 ir::Allocator* allocator) const;
  // Member `j`'s block (of type `type`) of a prepared all_gather result: its j-th run.
  static ir::Tensor GatherBlock(const ir::Tensor& prepared, int64_t j, const ir::ShapedType& type) {
    return prepared.Subrange(j * type.num_elements(), type);
  }
  // Whether the all-reduce `resolved` over `group` is split across processes, and how.
  ProcessShares SplitAcrossProcesses(const ResolvedCollective& resolved,
                                     const CollectiveGroup& group,
                                     const std::vector<ir::Tensor>& operands) const;
  // Calls visit(piece) for the pieces in which the members of `group` in `process` reduce and
  // send its share of a split all-reduce of `elem_bytes`-byte elements: those of its `member`-th
  // local member, or of all of them when `member` < 0. Allocates nothing.
  template <typename Visit>
  void ForEachSharePiece(const CollectiveGroup& group, int process, const ElementRange& share,
                         int64_t elem_bytes, int64_t member, Visit visit) const;
  // Posts a local arrival to the processes that run other members of its group, having told the
  // transport which of their operands this position reads (and, with a `prepared` all_gather
  // result, where to receive them).
  void PostToPeers(const Ticket& ticket, const std::vector<ir::Tensor>& operands,
                   const ir::Tensor& prepared, const ProcessShares& split);
  // Fills `inputs.firsts` for a split all-reduce (`shared` with other processes): an error if a
  // remote member's arrival holds other elements of its operand than this process reads, or any
  // arrival holds a share where none is read (processes that split differently); under mu_.
  absl::Status TakeShares(const Slot& slot, const Ticket& ticket, const SharedReduction* shared,
                          GroupOperands& inputs) const;
  // Waits for the rest of the ticket's group and computes this position's result.
  absl::StatusOr<ir::Tensor> Await(const Ticket& ticket, ir::Allocator* allocator,
                                   base::SpanRecorder* recorder);
  // Drops a ticket that will never be awaited (its run failed): its operand is released once the
  // rest of the group has read it.
  void Abandon(const Ticket& ticket);
  // Counts one reader of the ticket's group out of its slot; under mu_.
  void FinishReading(const Ticket& ticket);
  // Writes this member's share of `shared` and waits for the others'.
  absl::StatusOr<ir::Tensor> ReduceShared(const Ticket& ticket, const GroupOperands& inputs,
                                          SharedReduction& shared);
  // Parks `position` (under mu_, held again on return) until `done()` or the run is cancelled.
  template <typename Done>
  void ParkUntil(std::unique_lock<SpinMutex>& lock, int64_t position, const Ticket* ticket,
                 Done done, const SharedReduction* reduced = nullptr);
  // Wakes `position` if it is parked; under mu_.
  void WakePosition(int64_t position);
  // Fails the run if `position` waits (in `ticket`'s group, for a psend from `source`, or for
  // the shares of a `reduced` split all-reduce) for a position that is gone; under mu_ (released
  // when it fails). True if it failed.
  bool FailIfWaitingOnGone(std::unique_lock<SpinMutex>& lock, const Ticket* ticket,
                           int64_t source, const SharedReduction* reduced = nullptr);
  // Whether every member of the ticket's group has arrived in `slot`.
  static bool GroupHere(const Slot& slot, const CollectiveGroup& group);
  // Members of `group` that run in this process (the readers of its arrivals here).
  int LocalMembers(const CollectiveGroup& group) const;
  // Fails the run; posts the failure to the other processes unless it came from one.
  void CancelRun(const absl::Status& status, bool post);
  // Wakes the positions parked on `slot` whose groups are complete; under mu_.
  void WakeCompleteGroups(const Slot& slot);
  Slot* FindSlot(int64_t seq);
  Slot& SlotFor(int64_t seq);
  void ReleaseSlot(int64_t seq);
  absl::Status CancelledError(int64_t position) const;
  int64_t DeviceOf(int64_t position) const;
  // Whether `theirs` (of `member`) is the same collective as `mine` with `group`.
  bool Agree(const Arrival& mine, const Arrival& theirs, int64_t member,
             const CollectiveGroup& group) const;
  std::string Mismatch(int64_t seq, int64_t position, const Arrival& mine, int64_t other,
                       const Arrival& theirs) const;

  const CollectivePlan& plan_;
  const backends::Backend& backend_;
  const int64_t size_;  // mesh positions
  SlotCache* const cache_;
  RemotePeers* remote_ = nullptr;
  mutable SpinMutex mu_;
  uint64_t arrivals_ = 0;  // under mu_
  std::atomic<bool> cancelled_{false};
  absl::Status status_;
  std::vector<int64_t> next_seq_;  // per mesh position
  std::vector<Waiting> waiting_;   // per mesh position; under mu_
  std::vector<GroupOperands> scratch_;  // per mesh position: its group's operands in Await
  absl::flat_hash_map<int64_t, Slot*> slots_;  // live slots by sequence number
  // psends not yet received, in order, by (source, target) position; node-based, so a parked
  // receiver's queue stays put. Under mu_.
  std::map<std::pair<int64_t, int64_t>, std::deque<ir::Tensor>> mail_;
  std::vector<int64_t> receiving_from_;  // per position parked in precv: its source, else -1
  std::vector<bool> gone_;                // per position: its process sends nothing more
  absl::Status gone_status_;              // why (the first MarkGone's)
  // Split all-reduces still receiving the other processes' shares, by (seq, first member).
  std::map<std::pair<int64_t, int64_t>, std::shared_ptr<SharedReduction>> receiving_reduced_;
  std::vector<std::unique_ptr<Slot>> owned_;   // every slot this run made or borrowed
  std::vector<Slot*> free_;                    // of owned_, not live
};

struct RunState::SlotCache {
  std::mutex mu;
  std::vector<std::unique_ptr<Slot>> slots;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_FABRIC_H_
