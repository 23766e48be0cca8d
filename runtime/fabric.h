// The collective fabric of one run: how a device's program reaches collectives. A collective has
// two halves: arriving (posting the operand at the rendezvous, checked against the peers already
// there) and awaiting (waiting for the rest of the group, then reading the peers' operands
// directly). A blocking collective does both at once; an asynchronous one (`X_start` ...
// `X_done`, ir/async.h) arrives at its start, returns a future and awaits at its done, so the
// device computes in between. Devices run as tasks of a Scheduler (runtime/scheduler.h): a device
// that has to wait parks, handing its thread to another device, and the arrival that completes
// its group wakes it. Any failure cancels the run, waking every waiting device. The
// per-collective path allocates nothing once warm (slots and scratch buffers are recycled) and
// formats no strings unless it fails or records spans.
//
// RunState composes the parts, which share one lock (run_core.h):
//   run_core.h          the mesh, the lock, the run's failure, progress and parked positions
//   rendezvous.h        slots where groups meet, agreement checks, slot recycling (SlotCache)
//   shared_reduction.h  all-reduces whose members (and processes) share the work
//   mailbox.h           psend / precv
//   kernel_exchange.h   pallas_call kernels' copies and semaphores between devices
//   stall.h             failing a run that waits for what never comes, naming who is missing
// and meets the positions run by other processes through runtime/remote.h (fabric_remote.cc).
#ifndef SHARDJIT_RUNTIME_FABRIC_H_
#define SHARDJIT_RUNTIME_FABRIC_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/executable.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"
#include "runtime/collective_ops.h"
#include "runtime/collective_plan.h"
#include "runtime/kernel_exchange.h"
#include "runtime/mailbox.h"
#include "runtime/remote.h"
#include "runtime/rendezvous.h"
#include "runtime/run_core.h"
#include "runtime/shared_reduction.h"
#include "runtime/stall.h"

namespace shardjit::runtime {

// Shared state of one SPMD run over a mesh. Every device of the run must run as a Scheduler task.
class RunState final {
 public:
  using SlotCache = runtime::SlotCache;

  // Collectives are resolved through `plan` (its mesh is the run's), which must outlive the run,
  // and reduce on `backend`'s kernels (the backend of the programs run); `cache` (optional) lends
  // recycled slots.
  RunState(const CollectivePlan& plan, const backends::Backend& backend,
           SlotCache* cache = nullptr);

  const ir::Mesh& mesh() const { return core_.mesh(); }

  // Connects the run to the processes that run the mesh positions this one does not (before any
  // device starts; null: every position is here). Arrivals, psends and failures of local
  // positions are then posted to them too.
  void SetRemote(RemotePeers* remote) { core_.set_remote(remote); }
  // What another process posted: remote position `position`'s arrival at its `seq`-th collective
  // (`resolved` from its signature; operands undefined where not sent, `types` always), a psend
  // from remote `source` to local `target`, and the failure of the run (not posted back).
  // `share`: the elements of its operand a split all-reduce's arrival holds (empty: all).
  void DeliverArrival(int64_t seq, int64_t position, const ResolvedCollective* resolved,
                      std::vector<ir::Tensor> operands, std::vector<ir::ShapedType> types,
                      const ElementRange& share = {});
  void DeliverMail(int64_t source, int64_t target, ir::Tensor x) {
    mailbox_.Deliver(source, target, std::move(x));
  }
  // A kernel's copy or signal from a remote position to a local one.
  void DeliverKernelOp(RemoteKernelOp op) { kernels_.Deliver(std::move(op)); }
  // Elements `piece` of a split all-reduce's result (RemotePeers::PostReduced) from `process`,
  // held by `x` (a tensor of the result's type, or `piece.size()` elements of its dtype).
  void DeliverReduced(int process, int64_t seq, int64_t key, const ElementRange& piece,
                      const ir::Tensor& x) {
    shared_.Deliver(process, seq, key, piece, x);
  }
  void CancelFromPeer(const absl::Status& status) { core_.Cancel(status, /*post=*/false); }
  // Remote `positions` will send nothing more (their process left): a device waiting for one of
  // them, now or later, fails the run with `why`.
  void MarkGone(const std::vector<int64_t>& positions, const absl::Status& why) {
    stall_.MarkGone(positions, why);
  }

  // Executes collective `op` for mesh position `position`: axis_index and axis_size are answered
  // locally; a blocking collective meets its group; `X_start` posts its operand and returns a
  // future; `X_done` awaits the future it is given. With a `recorder`, waits, data steps and the
  // time an asynchronous collective is in flight are recorded as spans.
  absl::StatusOr<std::vector<ir::Tensor>> Collective(int64_t position, const ir::Op& op,
                                                     const std::vector<ir::Tensor>& operands,
                                                     ir::Allocator* allocator,
                                                     base::SpanRecorder* recorder = nullptr);

  // How position `position`'s kernels reach their instances on the other devices.
  backends::KernelPeers* KernelPeersOf(int64_t position) { return kernels_.PeersOf(position); }

  // Fails the run with `status` (the first failure wins) and wakes every waiting device.
  void Cancel(const absl::Status& status) { core_.Cancel(status, /*post=*/true); }
  // After the run: FailedPrecondition naming the first psend no precv received, else OK.
  absl::Status CheckAllReceived() const { return mailbox_.CheckAllReceived(); }
  // OK while the run goes on; the failure otherwise.
  absl::Status status() const { return core_.status(); }
  // Set once the run fails, for kernels to poll (base::StopSignal).
  const std::atomic<bool>* stopped_flag() const { return core_.stopped_flag(); }

  // Arrivals at collectives so far: grows while the run makes progress.
  uint64_t arrivals() const { return core_.arrivals(); }
  // Called when the run made no progress for `waited`: fails it (DeadlineExceeded) naming a
  // device waiting at a collective and the members of its group that never arrived. Returns
  // false, failing nothing, when no device waits for a missing peer.
  bool FailStalled(absl::Duration waited) { return stall_.FailStalled(waited); }

 private:
  class Pending;  // the AsyncValue of a future: a ticket not yet awaited

  // Posts `operands` for `position`'s next collective and checks the peers already there.
  absl::StatusOr<Ticket> Arrive(int64_t position, const ir::Op& op,
                                const std::vector<ir::Tensor>& operands, ir::Allocator* allocator,
                                bool record);
  // Waits for the rest of the ticket's group and computes this position's result.
  absl::StatusOr<ir::Tensor> Await(const Ticket& ticket, ir::Allocator* allocator,
                                   base::SpanRecorder* recorder);
  // Drops a ticket that will never be awaited (its run failed): its operand is released once the
  // rest of the group has read it.
  void Abandon(const Ticket& ticket);

  // fabric_remote.cc: the result of an all_gather of `operands` over `group` from `allocator`,
  // when members of the group run in other processes and each member's block is one run of the
  // result (so that theirs can be received in place); undefined otherwise.
  ir::Tensor PrepareGatherResult(const ResolvedCollective& resolved, const CollectiveGroup& group,
                                 const std::vector<ir::Tensor>& operands,
                                 ir::Allocator* allocator) const;
  // Member `j`'s block (of type `type`) of a prepared all_gather result: its j-th run.
  static ir::Tensor GatherBlock(const ir::Tensor& prepared, int64_t j, const ir::ShapedType& type) {
    return prepared.Subrange(j * type.num_elements(), type);
  }
  // Posts a local arrival to the processes that run other members of its group, having told the
  // transport which of their operands this position reads (and, with a `prepared` all_gather
  // result, where to receive them).
  void PostToPeers(const Ticket& ticket, const std::vector<ir::Tensor>& operands,
                   const ir::Tensor& prepared, const ProcessShares& split);

  const CollectivePlan& plan_;
  const backends::Backend& backend_;
  // The parts, in dependency order (each refers to those before it).
  RunCore core_;
  Rendezvous rendezvous_;
  KernelExchange kernels_;
  StallDiagnosis stall_;
  SharedReductions shared_;
  Mailbox mailbox_;
  std::vector<GroupOperands> scratch_;  // per mesh position: its group's operands in Await
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_FABRIC_H_
