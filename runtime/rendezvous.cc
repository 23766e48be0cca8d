#include "runtime/rendezvous.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "ir/printer.h"

namespace shardjit::runtime {

std::string DescribeCollective(const ir::Op& op,
                               const std::vector<ir::ShapedType>& operand_types) {
  std::string attrs = ir::PrintOp(op);
  std::vector<std::string> types;
  for (const ir::ShapedType& t : operand_types) types.push_back(t.ToString());
  return fmt::format("{} on {}", attrs.substr(attrs.find('=') + 2), absl::StrJoin(types, ", "));
}

Rendezvous::Rendezvous(RunCore& core, SlotCache* cache)
    : core_(core), cache_(cache), next_seq_(core.size(), 0) {
  slots_.reserve(16);
  if (cache_ != nullptr) {
    std::lock_guard<std::mutex> lock(cache_->mu);
    owned_ = std::move(cache_->slots);
    cache_->slots.clear();
  }
  std::vector<std::unique_ptr<Slot>> borrowed = std::move(owned_);
  owned_.clear();
  for (std::unique_ptr<Slot>& slot : borrowed) AddFree(std::move(slot));
}

Rendezvous::~Rendezvous() {
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

void Rendezvous::AddFree(std::unique_ptr<Slot> slot) {
  const int64_t size = core_.size();
  slot->arrivals.resize(size);
  slot->readers_left.assign(size, 0);
  slot->shared.resize(size);
  free_.push_back(slot.get());
  owned_.push_back(std::move(slot));
}

Slot* Rendezvous::Find(int64_t seq) {
  auto it = slots_.find(seq);
  return it == slots_.end() ? nullptr : it->second;
}

const Slot* Rendezvous::Find(int64_t seq) const {
  auto it = slots_.find(seq);
  return it == slots_.end() ? nullptr : it->second;
}

Slot& Rendezvous::SlotFor(int64_t seq) {
  if (Slot* slot = Find(seq)) return *slot;
  if (free_.empty()) AddFree(std::make_unique<Slot>());
  Slot* slot = free_.back();
  free_.pop_back();
  slots_.emplace(seq, slot);
  return *slot;
}

Arrival& Rendezvous::Enter(Slot& slot, int64_t position, const ResolvedCollective* resolved) {
  Arrival& arrival = slot.arrivals[position];
  arrival.present = true;
  ++slot.present;
  arrival.resolved = resolved;
  return arrival;
}

bool Rendezvous::GroupHere(const Slot& slot, const CollectiveGroup& group) {
  for (int64_t member : group.members) {
    if (!slot.arrivals[member].present) return false;
  }
  return true;
}

void Rendezvous::WaitForGroup(std::unique_lock<SpinMutex>& lock, Slot& slot,
                              const Ticket& ticket) {
  const int64_t position = ticket.position;
  const CollectiveGroup& group = *ticket.group;
  slot.waiters.push_back(position);
  core_.ParkUntil(lock, position, {.ticket = &ticket}, [&] { return GroupHere(slot, group); });
  slot.waiters.erase(std::find(slot.waiters.begin(), slot.waiters.end(), position));
}

void Rendezvous::WakeCompleteGroups(const Slot& slot) {
  for (int64_t waiter : slot.waiters) {
    if (GroupHere(slot, *core_.waiting(waiter).ticket->group)) core_.Wake(waiter);
  }
}

void Rendezvous::FinishReading(const Ticket& ticket) {
  Slot* slot = Find(ticket.seq);
  if (slot == nullptr) return;
  const std::vector<int64_t>& members = ticket.group->members;
  // The last reader of the group drops the arrivals so operands are not kept alive.
  int& left = slot->readers_left[members.front()];
  if (left == 0) left = core_.LocalMembers(*ticket.group);
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
  if (slot->present == 0 && slot->waiters.empty()) {
    auto it = slots_.find(ticket.seq);
    free_.push_back(it->second);
    slots_.erase(it);
  }
}

absl::Status Rendezvous::CheckArrived(const Slot& slot, const Ticket& ticket) const {
  const Arrival& mine = slot.arrivals[ticket.position];
  for (int64_t member : ticket.group->members) {
    const Arrival& theirs = slot.arrivals[member];
    if (member != ticket.position && theirs.present &&
        !Agree(mine, theirs, member, *ticket.group)) {
      return Mismatch(ticket.seq, ticket.position, mine, member, theirs);
    }
  }
  return absl::OkStatus();
}

bool Rendezvous::Agree(const Arrival& mine, const Arrival& theirs, int64_t member,
                       const CollectiveGroup& group) {
  if (theirs.resolved == mine.resolved) return true;  // the same op: same signature and groups
  const absl::StatusOr<CollectiveGroup>& their_group = theirs.resolved->groups[member];
  return theirs.resolved->signature == mine.resolved->signature && their_group.ok() &&
         their_group->members == group.members && theirs.types == mine.types;
}

absl::Status Rendezvous::Mismatch(int64_t seq, int64_t position, const Arrival& mine,
                                  int64_t other, const Arrival& theirs) const {
  return absl::FailedPreconditionError(fmt::format(
      "collective #{} mismatch: device {} runs {} but device {} runs {}", seq,
      core_.DeviceOf(position), DescribeCollective(*mine.resolved->op, mine.types),
      core_.DeviceOf(other), DescribeCollective(*theirs.resolved->op, theirs.types)));
}

}  // namespace shardjit::runtime
