#include "runtime/fabric.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/prim.h"
#include "ir/collective_groups.h"
#include "ir/types.h"

namespace shardjit::runtime {

// The future of an asynchronous collective: its start's ticket until its done awaits it.
class RunState::Pending final : public ir::AsyncValue {
 public:
  Pending(RunState* run, Ticket ticket) : run_(run), ticket_(ticket) {}
  ~Pending() override {
    if (!awaited_) run_->Abandon(ticket_);
  }
  RunState* run() const { return run_; }
  const Ticket& ticket() const { return ticket_; }
  // False if it was awaited before.
  bool MarkAwaited() { return !std::exchange(awaited_, true); }

 private:
  RunState* const run_;
  const Ticket ticket_;
  bool awaited_ = false;
};

RunState::RunState(const CollectivePlan& plan, const backends::Backend& backend,
                   SlotCache* cache)
    : plan_(plan),
      backend_(backend),
      core_(plan.mesh()),
      rendezvous_(core_, cache),
      kernels_(core_),
      stall_(core_, rendezvous_, kernels_),
      shared_(core_, backend, stall_),
      mailbox_(core_, plan, stall_),
      scratch_(core_.size()) {}

absl::StatusOr<std::vector<ir::Tensor>> RunState::Collective(
    int64_t position, const ir::Op& op, const std::vector<ir::Tensor>& operands,
    ir::Allocator* allocator, base::SpanRecorder* recorder) {
  const std::string& opcode = op.opcode();
  const ir::Prim prim = ir::PrimOf(op);
  if (ir::IsAsyncDone(prim)) {
    auto* pending =
        operands.size() == 1 ? dynamic_cast<Pending*>(operands[0].future()) : nullptr;
    if (pending == nullptr || pending->run() != this) {
      return absl::InvalidArgumentError(
          fmt::format("{}: operand is not a future started in this run", opcode));
    }
    if (!pending->MarkAwaited()) {
      return absl::InvalidArgumentError(fmt::format("{}: future awaited twice", opcode));
    }
    const Ticket& ticket = pending->ticket();
    ASSIGN_OR_RETURN(ir::Tensor result, Await(ticket, allocator, recorder));
    if (recorder != nullptr) {
      recorder->Record({ticket.resolved->op->opcode(), "transfer", ticket.arrival_ns,
                        base::SpanClockNs() - ticket.arrival_ns,
                        ticket.resolved->op->name_scope()});
    }
    return std::vector<ir::Tensor>{std::move(result)};
  }
  const ir::AxisList axes = ir::CollectiveAxes(op);
  const absl::StatusOr<int64_t> axis_size = ir::CombinedAxisSize(mesh(), axes);
  if (!axis_size.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}", opcode, axis_size.status().message()));
  }
  if (prim == ir::Prim::kPsend) return mailbox_.Send(position, op, operands.at(0));
  if (prim == ir::Prim::kPrecv) return mailbox_.Receive(position, op, allocator);
  if (prim == ir::Prim::kAxisIndex || prim == ir::Prim::kAxisSize) {
    const int64_t value = prim == ir::Prim::kAxisIndex
                              ? ir::CombinedAxisIndex(mesh(), position, axes)
                              : *axis_size;
    return std::vector<ir::Tensor>{
        ir::Tensor::FromDoubles({ir::DType::kS32, {}}, {static_cast<double>(value)}, allocator)};
  }
  ASSIGN_OR_RETURN(Ticket ticket, Arrive(position, op, operands, allocator, recorder != nullptr));
  if (ir::IsAsyncStart(prim)) {
    return std::vector<ir::Tensor>{ir::Tensor::Future(ir::FromProto(op.result_types(0)),
                                                      std::make_shared<Pending>(this, ticket))};
  }
  ASSIGN_OR_RETURN(ir::Tensor result, Await(ticket, allocator, recorder));
  return std::vector<ir::Tensor>{std::move(result)};
}

absl::StatusOr<Ticket> RunState::Arrive(int64_t position, const ir::Op& op,
                                        const std::vector<ir::Tensor>& operands,
                                        ir::Allocator* allocator, bool record) {
  const ResolvedCollective& resolved = plan_.Resolve(op);
  const absl::StatusOr<CollectiveGroup>& group = resolved.groups[position];
  if (!group.ok()) {
    absl::Status error = absl::InvalidArgumentError(
        fmt::format("{}: {}", op.opcode(), group.status().message()));
    Cancel(error);  // its peers would otherwise wait for it until the timeout
    return error;
  }
  Ticket ticket{0, position, &resolved, &*group, record ? base::SpanClockNs() : 0};
  ir::Tensor prepared = PrepareGatherResult(resolved, *group, operands, allocator);
  const ProcessShares split = shared_.SplitAcrossProcesses(resolved, *group, operands);
  std::shared_ptr<SharedReduction> receiving;  // a split all-reduce's, begun by this arrival
  ir::Tensor split_out;  // its result, if this arrival begins it (allocated without the lock)
  if (!split.processes.empty()) {
    split_out =
        ir::Tensor::Empty(ir::FromProto(resolved.op->result_types(0)).Awaited(), allocator);
  }
  std::unique_lock<SpinMutex> lock(core_.mu());
  core_.CountArrival();
  ticket.seq = rendezvous_.NextSeq(position);
  Slot& slot = rendezvous_.SlotFor(ticket.seq);
  Arrival& mine = Rendezvous::Enter(slot, position, &resolved);
  mine.operands.assign(operands.begin(), operands.end());
  mine.prepared = prepared;
  mine.share = {};
  mine.types.resize(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) mine.types[i] = operands[i].type();
  // Anyone of my group already here must agree with me.
  if (absl::Status agreed = rendezvous_.CheckArrived(slot, ticket); !agreed.ok()) {
    lock.unlock();
    Cancel(agreed);
    return agreed;
  }
  receiving = shared_.BeginSplit(slot, ticket, split, split_out);
  rendezvous_.WakeCompleteGroups(slot);
  lock.unlock();
  // Posted before this process's operands leave: the other processes' shares need them.
  if (receiving != nullptr) shared_.ExpectPieces(ticket, *receiving);
  if (core_.remote() != nullptr) PostToPeers(ticket, operands, prepared, split);
  // This position's block of a prepared all_gather result is copied while the other processes'
  // blocks travel, not after they came (Await hands it on in place).
  if (prepared.defined()) {
    const ir::Tensor& x = operands[0];
    std::memcpy(GatherBlock(prepared, group->my_index, x.type()).data(), x.data(), x.byte_size());
  }
  return ticket;
}

absl::StatusOr<ir::Tensor> RunState::Await(const Ticket& ticket, ir::Allocator* allocator,
                                           base::SpanRecorder* recorder) {
  const int64_t wait_ns = recorder != nullptr ? base::SpanClockNs() : 0;
  const CollectiveGroup& group = *ticket.group;
  const ir::Op& op = *ticket.resolved->op;
  const int64_t position = ticket.position;
  std::unique_lock<SpinMutex> lock(core_.mu());
  Slot* found = rendezvous_.Find(ticket.seq);  // holds my arrival until I have read the group's
  if (found == nullptr || !found->arrivals[position].present) {
    return absl::InternalError(fmt::format("collective #{} on device {}: arrival lost",
                                           ticket.seq, core_.DeviceOf(position)));
  }
  Slot& slot = *found;
  if (!Rendezvous::GroupHere(slot, group) && !core_.cancelled() &&
      !stall_.FailIfWaitingOnGone(lock, {.ticket = &ticket})) {
    rendezvous_.WaitForGroup(lock, slot, ticket);
  }
  if (recorder != nullptr) {
    recorder->Record(
        {op.opcode(), "wait", wait_ns, base::SpanClockNs() - wait_ns, op.name_scope()});
  }
  if (core_.cancelled()) return core_.CancelledError(position, core_.failure());
  // Everyone arrived: check every member's arrival against mine once more (a member that
  // arrived after me checked only the members of its own group).
  const Arrival& mine = slot.arrivals[position];
  GroupOperands& inputs = scratch_[position];
  inputs.my_index = group.my_index;
  inputs.axis_indices.assign(group.axis_indices.begin(), group.axis_indices.end());
  inputs.inputs.clear();
  inputs.all_inputs.clear();
  inputs.output = mine.prepared;
  const bool several = mine.operands.size() > 1;
  for (int64_t member : group.members) {
    const Arrival& theirs = slot.arrivals[member];
    if (!Rendezvous::Agree(mine, theirs, member, group)) {
      absl::Status error = rendezvous_.Mismatch(ticket.seq, position, mine, member, theirs);
      lock.unlock();
      Cancel(error);
      return error;
    }
    // My block of a prepared all_gather result is in place already (Arrive).
    inputs.inputs.push_back(member == position && mine.prepared.defined()
                                ? GatherBlock(mine.prepared, group.my_index, mine.types[0])
                                : theirs.operands[0]);
    if (several) inputs.all_inputs.push_back(theirs.operands);
  }
  // A ppermute operand has one reader, its target: handed over, so that the target may update
  // it in place once the sender has moved on (a reduce-scatter ring adds into it).
  if (ticket.resolved->kind == ir::Prim::kPpermute) {
    const int64_t me = group.axis_indices[group.my_index];
    for (const ir::PermutePair& pair : op.ppermute().perm()) {
      if (pair.target() != me) continue;
      for (size_t j = 0; j < group.members.size(); ++j) {
        if (group.axis_indices[j] == pair.source()) {
          slot.arrivals[group.members[j]].operands[0] = ir::Tensor();
        }
      }
    }
  }
  const std::shared_ptr<SharedReduction> shared = shared_.ForGroup(slot, ticket, allocator);
  if (absl::Status s = shared_.TakeShares(slot, ticket, shared.get(), inputs); !s.ok()) {
    lock.unlock();
    Cancel(s);
    return s;
  }
  rendezvous_.FinishReading(ticket);
  lock.unlock();
  const int64_t data_ns = recorder != nullptr ? base::SpanClockNs() : 0;
  absl::StatusOr<ir::Tensor> result = shared != nullptr
                                          ? shared_.Reduce(ticket, inputs, *shared)
                                          : ComputeCollective(op, inputs, backend_, allocator);
  inputs.inputs.clear();  // the peers' operands are not kept alive by the scratch
  inputs.all_inputs.clear();
  inputs.firsts.clear();
  inputs.output = ir::Tensor();
  if (recorder != nullptr) {
    const std::string name = op.opcode() + " data";
    recorder->Record(
        {name, "collective", data_ns, base::SpanClockNs() - data_ns, op.name_scope()});
  }
  return result;
}

void RunState::Abandon(const Ticket& ticket) {
  std::lock_guard<SpinMutex> lock(core_.mu());
  rendezvous_.FinishReading(ticket);
}

}  // namespace shardjit::runtime
