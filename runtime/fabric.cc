#include "runtime/fabric.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "ir/prim.h"
#include "ir/fmt_absl.h"
#include "ir/printer.h"
#include "ir/sharding.h"
#include "ir/types.h"
#include "ir/collective_groups.h"
#include "runtime/collective_ops.h"

namespace shardjit::runtime {
namespace {

std::string Describe(const ir::Op& op, const std::vector<ir::ShapedType>& operand_types) {
  std::string attrs = ir::PrintOp(op);
  std::vector<std::string> types;
  for (const ir::ShapedType& t : operand_types) types.push_back(t.ToString());
  return fmt::format("{} on {}", attrs.substr(attrs.find('=') + 2), absl::StrJoin(types, ", "));
}

// All-reduce results from this size on are computed once per group, a share per member.
constexpr int64_t kSharedReductionBytes = 64 << 10;
// A shared reduction is written, and a split one's share sent, in pieces of at most this size:
// a piece travels while the next is reduced.
constexpr int64_t kReducedPieceBytes = 4 << 20;

}  // namespace

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
      size_(ir::MeshSize(plan.mesh())),
      cache_(cache),
      next_seq_(size_, 0),
      waiting_(size_),
      scratch_(size_),
      receiving_from_(size_, -1),
      gone_(size_, false) {
  slots_.reserve(16);
  if (cache_ != nullptr) {
    std::lock_guard<std::mutex> lock(cache_->mu);
    owned_ = std::move(cache_->slots);
    cache_->slots.clear();
  }
  for (std::unique_ptr<Slot>& slot : owned_) {
    slot->arrivals.resize(size_);
    slot->readers_left.assign(size_, 0);
    slot->shared.resize(size_);
    free_.push_back(slot.get());
  }
}

RunState::~RunState() {
  if (cache_ == nullptr) return;
  for (std::unique_ptr<Slot>& slot : owned_) {
    for (Arrival& a : slot->arrivals) {
      a.present = false;
      a.operands.clear();
      a.prepared = ir::Tensor();
    }
    slot->present = 0;
    slot->waiters.clear();
    for (auto& s : slot->shared) s.reset();
  }
  std::lock_guard<std::mutex> lock(cache_->mu);
  cache_->slots = std::move(owned_);
}

RunState::Slot* RunState::FindSlot(int64_t seq) {
  auto it = slots_.find(seq);
  return it == slots_.end() ? nullptr : it->second;
}

RunState::Slot& RunState::SlotFor(int64_t seq) {
  if (Slot* slot = FindSlot(seq)) return *slot;
  if (free_.empty()) {
    owned_.push_back(std::make_unique<Slot>());
    Slot& slot = *owned_.back();
    slot.arrivals.resize(size_);
    slot.readers_left.assign(size_, 0);
    slot.shared.resize(size_);
    free_.push_back(&slot);
  }
  Slot* slot = free_.back();
  free_.pop_back();
  slots_.emplace(seq, slot);
  return *slot;
}

void RunState::ReleaseSlot(int64_t seq) {
  auto it = slots_.find(seq);
  free_.push_back(it->second);
  slots_.erase(it);
}

void RunState::Cancel(const absl::Status& status) { CancelRun(status, /*post=*/true); }

void RunState::CancelFromPeer(const absl::Status& status) { CancelRun(status, /*post=*/false); }

void RunState::CancelRun(const absl::Status& status, bool post) {
  bool first = false;
  {
    std::lock_guard<SpinMutex> lock(mu_);
    first = !cancelled_;
    if (status_.ok()) status_ = status;
    cancelled_ = true;
    for (int64_t p = 0; p < size_; ++p) WakePosition(p);
  }
  if (post && first && remote_ != nullptr) remote_->PostFailure(status);
}

int RunState::LocalMembers(const CollectiveGroup& group) const {
  if (remote_ == nullptr) return static_cast<int>(group.members.size());
  int local = 0;
  for (int64_t member : group.members) local += remote_->IsLocal(member) ? 1 : 0;
  return local;
}

void RunState::WakeCompleteGroups(const Slot& slot) {
  for (int64_t waiter : slot.waiters) {
    if (GroupHere(slot, *waiting_[waiter].ticket->group)) WakePosition(waiter);
  }
}

absl::Status RunState::status() const {
  if (!cancelled_.load(std::memory_order_acquire)) return absl::OkStatus();
  std::lock_guard<SpinMutex> lock(mu_);
  return status_;
}

uint64_t RunState::arrivals() const {
  std::lock_guard<SpinMutex> lock(mu_);
  return arrivals_;
}

absl::Status RunState::CancelledError(int64_t position) const {
  return absl::CancelledError(
      fmt::format("device {}: run cancelled: {}", DeviceOf(position), status().message()));
}

void RunState::WakePosition(int64_t position) {
  if (Scheduler::Task* task = waiting_[position].task) Scheduler::Wake(*task);
}

template <typename Done>
void RunState::ParkUntil(std::unique_lock<SpinMutex>& lock, int64_t position,
                         const Ticket* ticket, Done done, const SharedReduction* reduced) {
  if (done() || cancelled_) return;
  waiting_[position] = {Scheduler::Current(), ticket, reduced};
  while (!done() && !cancelled_) Scheduler::Park(lock);
  waiting_[position] = {};
}

bool RunState::GroupHere(const Slot& slot, const CollectiveGroup& group) {
  for (int64_t member : group.members) {
    if (!slot.arrivals[member].present) return false;
  }
  return true;
}

bool RunState::FailStalled(absl::Duration waited) {
  std::unique_lock<SpinMutex> lock(mu_);
  if (cancelled_) return false;
  for (int64_t p = 0; p < size_; ++p) {
    if (const int64_t source = receiving_from_[p]; source >= 0) {
      absl::Status error = absl::DeadlineExceededError(
          fmt::format("precv on device {} waited {} for a psend from device {} that never came",
                      DeviceOf(p), absl::FormatDuration(waited), DeviceOf(source)));
      lock.unlock();
      Cancel(error);
      return true;
    }
  }
  for (int64_t p = 0; p < size_; ++p) {
    const SharedReduction* reduced = waiting_[p].reduced;
    if (reduced == nullptr || reduced->missing == 0) continue;
    std::vector<int> missing;
    for (size_t i = 0; i < reduced->others.size(); ++i) {
      if (reduced->received[i] < reduced->their_shares[i].size()) {
        missing.push_back(reduced->others[i]);
      }
    }
    const Ticket& ticket = *waiting_[p].ticket;
    absl::Status error = absl::DeadlineExceededError(fmt::format(
        "collective #{} ({}) on device {}: the shares of its all-reduce that processes [{}] "
        "reduce did not come within {}",
        ticket.seq, ticket.resolved->op->opcode(), DeviceOf(p), absl::StrJoin(missing, ","),
        absl::FormatDuration(waited)));
    lock.unlock();
    Cancel(error);
    return true;
  }
  for (int64_t p = 0; p < size_; ++p) {
    const Ticket* ticket = waiting_[p].ticket;
    if (ticket == nullptr || waiting_[p].reduced != nullptr) continue;
    const Slot* slot = FindSlot(ticket->seq);
    if (slot == nullptr) continue;
    std::vector<int64_t> missing;
    for (int64_t member : ticket->group->members) {
      if (!slot->arrivals[member].present) missing.push_back(DeviceOf(member));
    }
    if (missing.empty()) continue;
    std::string where;
    if (remote_ != nullptr) {
      std::set<int> processes;
      for (int64_t member : ticket->group->members) {
        if (!slot->arrivals[member].present) processes.insert(remote_->ProcessOf(member));
      }
      where = fmt::format(" (run by process {})", absl::StrJoin(processes, ", "));
    }
    absl::Status error = absl::DeadlineExceededError(fmt::format(
        "collective #{} ({}) on device {}: devices [{}]{} of its group did not arrive within {}",
        ticket->seq, Describe(*ticket->resolved->op, slot->arrivals[p].types), DeviceOf(p),
        absl::StrJoin(missing, ","), where, absl::FormatDuration(waited)));
    lock.unlock();
    Cancel(error);
    return true;
  }
  return false;
}

int64_t RunState::DeviceOf(int64_t position) const {
  return mesh().device_ids_size() ? mesh().device_ids(position) : position;
}

bool RunState::Agree(const Arrival& mine, const Arrival& theirs, int64_t member,
                     const CollectiveGroup& group) const {
  if (theirs.resolved == mine.resolved) return true;  // the same op: same signature and groups
  const absl::StatusOr<CollectiveGroup>& their_group = theirs.resolved->groups[member];
  return theirs.resolved->signature == mine.resolved->signature && their_group.ok() &&
         their_group->members == group.members && theirs.types == mine.types;
}

std::string RunState::Mismatch(int64_t seq, int64_t position, const Arrival& mine,
                               int64_t other, const Arrival& theirs) const {
  return fmt::format("collective #{} mismatch: device {} runs {} but device {} runs {}", seq,
                     DeviceOf(position), Describe(*mine.resolved->op, mine.types),
                     DeviceOf(other), Describe(*theirs.resolved->op, theirs.types));
}

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
    absl::StatusOr<ir::Tensor> result = Await(ticket, allocator, recorder);
    if (!result.ok()) return result.status();
    if (recorder != nullptr) {
      recorder->Record({ticket.resolved->op->opcode(), "transfer", ticket.arrival_ns,
                        base::SpanClockNs() - ticket.arrival_ns,
                        ticket.resolved->op->name_scope()});
    }
    return std::vector<ir::Tensor>{std::move(*result)};
  }
  const ir::AxisList axes = ir::CollectiveAxes(op);
  const absl::StatusOr<int64_t> axis_size = ir::CombinedAxisSize(mesh(), axes);
  if (!axis_size.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}", opcode, axis_size.status().message()));
  }
  if (prim == ir::Prim::kPsend) return Send(position, op, operands.at(0));
  if (prim == ir::Prim::kPrecv) return Receive(position, op, allocator);
  if (prim == ir::Prim::kAxisIndex || prim == ir::Prim::kAxisSize) {
    const int64_t value = prim == ir::Prim::kAxisIndex
                              ? ir::CombinedAxisIndex(mesh(), position, axes)
                              : *axis_size;
    return std::vector<ir::Tensor>{
        ir::Tensor::FromDoubles({ir::DType::kS32, {}}, {static_cast<double>(value)}, allocator)};
  }
  absl::StatusOr<Ticket> ticket = Arrive(position, op, operands, allocator, recorder != nullptr);
  if (!ticket.ok()) return ticket.status();
  if (ir::IsAsyncStart(prim)) {
    return std::vector<ir::Tensor>{ir::Tensor::Future(ir::FromProto(op.result_types(0)),
                                                      std::make_shared<Pending>(this, *ticket))};
  }
  absl::StatusOr<ir::Tensor> result = Await(*ticket, allocator, recorder);
  if (!result.ok()) return result.status();
  return std::vector<ir::Tensor>{std::move(*result)};
}

absl::StatusOr<std::vector<ir::Tensor>> RunState::Send(int64_t position, const ir::Op& op,
                                                      const ir::Tensor& x) {
  const absl::StatusOr<CollectiveGroup>& group = plan_.Resolve(op).groups[position];
  if (!group.ok()) return group.status();
  const int64_t me = group->axis_indices[group->my_index];
  std::vector<int64_t> remote_targets;
  {
    std::lock_guard<SpinMutex> lock(mu_);
    ++arrivals_;
    for (const ir::PermutePair& pair : op.ppermute().perm()) {
      if (pair.source() != me) continue;
      const int64_t target = group->members[pair.target()];
      if (remote_ != nullptr && !remote_->IsLocal(target)) {
        remote_targets.push_back(target);
        continue;
      }
      mail_[{position, target}].push_back(x);  // operands are immutable: no copy
      WakePosition(target);
    }
  }
  for (int64_t target : remote_targets) remote_->PostMail(position, target, x);
  return std::vector<ir::Tensor>{ir::Tensor::Empty({ir::DType::kPred, {0}})};
}

absl::StatusOr<std::vector<ir::Tensor>> RunState::Receive(int64_t position, const ir::Op& op,
                                                         ir::Allocator* allocator) {
  const absl::StatusOr<CollectiveGroup>& group = plan_.Resolve(op).groups[position];
  if (!group.ok()) return group.status();
  const ir::ShapedType type = ir::FromProto(op.result_types(0));
  const int64_t me = group->axis_indices[group->my_index];
  int64_t source = -1;
  for (const ir::PermutePair& pair : op.precv().perm()) {
    if (pair.target() == me) source = group->members[pair.source()];
  }
  if (source < 0) return std::vector<ir::Tensor>{ir::Tensor::Zeros(type, allocator)};
  std::unique_lock<SpinMutex> lock(mu_);
  ++arrivals_;
  std::deque<ir::Tensor>& queue = mail_[{source, position}];
  receiving_from_[position] = source;
  if (queue.empty()) FailIfWaitingOnGone(lock, nullptr, source);
  ParkUntil(lock, position, nullptr, [&] { return !queue.empty(); });
  receiving_from_[position] = -1;
  if (queue.empty()) {
    lock.unlock();
    return CancelledError(position);
  }
  ir::Tensor x = std::move(queue.front());
  queue.pop_front();
  lock.unlock();
  if (x.type() != type) {
    absl::Status error = absl::FailedPreconditionError(
        fmt::format("precv on device {} expects {} from device {}, which sent {}",
                    DeviceOf(position), type.ToString(), DeviceOf(source), x.type().ToString()));
    Cancel(error);
    return error;
  }
  return std::vector<ir::Tensor>{std::move(x)};
}

absl::Status RunState::CheckAllReceived() const {
  std::lock_guard<SpinMutex> lock(mu_);
  for (const auto& [pair, queue] : mail_) {
    if (queue.empty()) continue;
    return absl::FailedPreconditionError(fmt::format(
        "{} psend(s) from device {} to device {} ({} first) were never received: no matching "
        "precv ran",
        queue.size(), DeviceOf(pair.first), DeviceOf(pair.second), queue.front().type().ToString()));
  }
  return absl::OkStatus();
}

template <typename Visit>
void RunState::ForEachSharePiece(const CollectiveGroup& group, int process,
                                 const ElementRange& share, int64_t elem_bytes, int64_t member,
                                 Visit visit) const {
  int64_t members = 0;
  for (int64_t m : group.members) {
    members += remote_ == nullptr || remote_->ProcessOf(m) == process ? 1 : 0;
  }
  const int64_t per_piece = std::max<int64_t>(1, kReducedPieceBytes / elem_bytes);
  for (int64_t k = member < 0 ? 0 : member; k < (member < 0 ? members : member + 1); ++k) {
    const ElementRange part{share.begin + share.size() * k / members,
                            share.begin + share.size() * (k + 1) / members};
    const int64_t count = (part.size() + per_piece - 1) / per_piece;
    for (int64_t c = 0; c < count; ++c) {
      visit(ElementRange{part.begin + part.size() * c / count,
                         part.begin + part.size() * (c + 1) / count});
    }
  }
}

absl::StatusOr<RunState::Ticket> RunState::Arrive(int64_t position, const ir::Op& op,
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
  const ProcessShares split = SplitAcrossProcesses(resolved, *group, operands);
  std::shared_ptr<SharedReduction> receiving;  // a split all-reduce's, begun by this arrival
  ir::Tensor split_out;  // its result, if this arrival begins it (allocated without the lock)
  if (!split.processes.empty()) {
    split_out =
        ir::Tensor::Empty(ir::FromProto(resolved.op->result_types(0)).Awaited(), allocator);
  }
  std::unique_lock<SpinMutex> lock(mu_);
  ++arrivals_;
  ticket.seq = next_seq_[position]++;
  Slot& slot = SlotFor(ticket.seq);
  Arrival& mine = slot.arrivals[position];
  mine.present = true;
  ++slot.present;
  mine.resolved = &resolved;
  mine.operands.assign(operands.begin(), operands.end());
  mine.prepared = prepared;
  mine.share = {};
  mine.types.resize(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) mine.types[i] = operands[i].type();
  // Anyone of my group already here must agree with me.
  for (int64_t member : group->members) {
    const Arrival& theirs = slot.arrivals[member];
    if (member != position && theirs.present && !Agree(mine, theirs, member, *group)) {
      absl::Status error =
          absl::FailedPreconditionError(Mismatch(ticket.seq, position, mine, member, theirs));
      lock.unlock();
      Cancel(error);
      return error;
    }
  }
  // The first local member of a split all-reduce begins its result.
  if (!split.processes.empty() && slot.shared[group->members.front()] == nullptr) {
    receiving = std::make_shared<SharedReduction>();
    receiving->out = std::move(split_out);
    receiving->group = &*group;
    const int me = remote_->ProcessOf(position);
    for (size_t i = 0; i < split.processes.size(); ++i) {
      if (split.processes[i] == me) {
        receiving->mine = split.shares[i];
        continue;
      }
      receiving->others.push_back(split.processes[i]);
      receiving->their_shares.push_back(split.shares[i]);
      receiving->received.push_back(0);
      receiving->missing += split.shares[i].size();
    }
    slot.shared[group->members.front()] = receiving;
    receiving_reduced_[{ticket.seq, group->members.front()}] = receiving;
  }
  // Wake the devices parked on this slot whose groups are now complete.
  WakeCompleteGroups(slot);
  lock.unlock();
  if (receiving != nullptr) {
    // Posted before this process's operands leave: the other processes' shares need them.
    const int64_t elem = ir::DTypeSize(receiving->out.dtype());
    for (size_t i = 0; i < receiving->others.size(); ++i) {
      ForEachSharePiece(*group, receiving->others[i], receiving->their_shares[i], elem, -1,
                        [&](const ElementRange& piece) {
                          remote_->ExpectReduced(ticket.seq, group->members.front(),
                                                 receiving->others[i], receiving->out, piece);
                        });
    }
  }
  if (remote_ != nullptr) PostToPeers(ticket, operands, prepared, split);
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
  std::unique_lock<SpinMutex> lock(mu_);
  Slot* found = FindSlot(ticket.seq);  // holds my arrival until I have read the group's
  if (found == nullptr || !found->arrivals[position].present) {
    return absl::InternalError(fmt::format("collective #{} on device {}: arrival lost",
                                           ticket.seq, DeviceOf(position)));
  }
  Slot& slot = *found;
  if (!GroupHere(slot, group) && !cancelled_ && !FailIfWaitingOnGone(lock, &ticket, -1)) {
    slot.waiters.push_back(position);
    ParkUntil(lock, position, &ticket, [&] { return GroupHere(slot, group); });
    slot.waiters.erase(std::find(slot.waiters.begin(), slot.waiters.end(), position));
  }
  if (recorder != nullptr) {
    recorder->Record(
        {op.opcode(), "wait", wait_ns, base::SpanClockNs() - wait_ns, op.name_scope()});
  }
  if (cancelled_) {
    return absl::CancelledError(
        fmt::format("device {}: run cancelled: {}", DeviceOf(position), status_.message()));
  }
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
    if (!Agree(mine, theirs, member, group)) {
      absl::Status error = absl::FailedPreconditionError(
          Mismatch(ticket.seq, position, mine, member, theirs));
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
  // An all-reduce gives every member the same result: past kSharedReductionBytes, the group
  // computes it once, each member a share, instead of each member all of it.
  // A split one's was begun at arrival.
  std::shared_ptr<SharedReduction> shared;
  if (ir::IsAllReduce(ticket.resolved->kind)) {
    std::shared_ptr<SharedReduction>& entry = slot.shared[group.members.front()];
    const ir::TensorType& out_proto = op.result_types(0);
    int64_t bytes = ir::DTypeSize(ir::FromProto(out_proto.dtype()));
    for (int64_t d : out_proto.dims()) bytes *= d;
    if (entry == nullptr && LocalMembers(group) > 1 && bytes >= kSharedReductionBytes) {
      entry = std::make_shared<SharedReduction>();
      entry->out = ir::Tensor::Empty(ir::FromProto(out_proto).Awaited(), allocator);
      entry->mine = {0, entry->out.num_elements()};
      entry->group = &group;
    }
    shared = entry;
  }
  if (absl::Status s = TakeShares(slot, ticket, shared.get(), inputs); !s.ok()) {
    lock.unlock();
    Cancel(s);
    return s;
  }
  FinishReading(ticket);
  lock.unlock();
  const int64_t data_ns = recorder != nullptr ? base::SpanClockNs() : 0;
  absl::StatusOr<ir::Tensor> result = shared != nullptr
                                          ? ReduceShared(ticket, inputs, *shared)
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

absl::StatusOr<ir::Tensor> RunState::ReduceShared(const Ticket& ticket,
                                                  const GroupOperands& inputs,
                                                  SharedReduction& shared) {
  const ir::Prim kind = ticket.resolved->kind;
  const CollectiveGroup& group = *ticket.group;
  // The members in this process share the work (all of them but in one process).
  int64_t members = 0;
  int64_t share = 0;
  for (int64_t member : group.members) {
    if (remote_ != nullptr && !remote_->IsLocal(member)) continue;
    if (member == ticket.position) share = members;
    ++members;
  }
  const int process = remote_ != nullptr ? remote_->ProcessOf(ticket.position) : 0;
  absl::Status reduced;
  ForEachSharePiece(group, process, shared.mine, ir::DTypeSize(shared.out.dtype()), share,
                    [&](const ElementRange& piece) {
                      if (!reduced.ok()) return;
                      reduced = ReduceRange(inputs.inputs, kind, backend_, shared.out, piece.begin,
                                            piece.end, inputs.firsts);
                      if (reduced.ok() && !shared.others.empty()) {
                        remote_->PostReduced(ticket.seq, group.members.front(), shared.out,
                                             piece, shared.others);
                      }
                    });
  if (!reduced.ok()) {
    Cancel(reduced);  // the others would wait for this share
    return reduced;
  }
  std::unique_lock<SpinMutex> lock(mu_);
  ++shared.finished;
  if (shared.Done(members)) {
    for (int64_t member : group.members) WakePosition(member);
    return shared.out;
  }
  // Split: waits for the other processes' shares too.
  const SharedReduction* split = shared.others.empty() ? nullptr : &shared;
  if (split != nullptr && FailIfWaitingOnGone(lock, &ticket, -1, split)) {
    lock.unlock();
    return CancelledError(ticket.position);
  }
  ParkUntil(
      lock, ticket.position, split != nullptr ? &ticket : nullptr,
      [&] { return shared.Done(members); }, split);
  if (!shared.Done(members)) {
    lock.unlock();
    return CancelledError(ticket.position);
  }
  return shared.out;
}

void RunState::FinishReading(const Ticket& ticket) {
  Slot* slot = FindSlot(ticket.seq);
  if (slot == nullptr) return;
  const std::vector<int64_t>& members = ticket.group->members;
  // The last reader of the group drops the arrivals so operands are not kept alive.
  int& left = slot->readers_left[members.front()];
  if (left == 0) left = LocalMembers(*ticket.group);
  if (--left > 0) return;
  for (int64_t member : members) {
    Arrival& arrival = slot->arrivals[member];
    if (!arrival.present) continue;
    arrival.present = false;
    arrival.operands.clear();
    arrival.prepared = ir::Tensor();
    --slot->present;
  }
  slot->shared[members.front()].reset();  // its members hold it
  if (slot->present == 0 && slot->waiters.empty()) ReleaseSlot(ticket.seq);
}

void RunState::Abandon(const Ticket& ticket) {
  std::lock_guard<SpinMutex> lock(mu_);
  FinishReading(ticket);
}

}  // namespace shardjit::runtime
