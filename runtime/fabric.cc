#include "runtime/fabric.h"

#include <thread>

#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "ir/async.h"
#include "ir/fmt_absl.h"
#include "ir/printer.h"
#include "ir/sharding.h"
#include "ir/types.h"
#include "runtime/collective_groups.h"
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

RunState::RunState(const CollectivePlan& plan, absl::Duration timeout, CoreSemaphore* cores)
    : plan_(plan),
      timeout_(timeout),
      cores_(cores),
      holds_core_(ir::MeshSize(plan.mesh()), 0),
      next_seq_(ir::MeshSize(plan.mesh()), 0) {}

bool RunState::TakeCore(int64_t position) {
  if (cores_ == nullptr || holds_core_[position]) return true;
  holds_core_[position] = cores_->Acquire(&cancelled_);
  return holds_core_[position];
}

void RunState::GiveCore(int64_t position) {
  if (cores_ == nullptr || !holds_core_[position]) return;
  holds_core_[position] = 0;
  cores_->Release();
}

void RunState::Cancel(const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = status;
    cancelled_ = true;
  }
  cv_.notify_all();
  if (cores_ != nullptr) cores_->Interrupt();
}

absl::Status RunState::status() const {
  if (!cancelled_.load(std::memory_order_acquire)) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
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
    ir::Allocator* allocator, backends::SpanRecorder* recorder) {
  const std::string& opcode = op.opcode();
  if (ir::IsAsyncDone(opcode)) {
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
                        backends::SpanClockNs() - ticket.arrival_ns,
                        ticket.resolved->op->name_scope()});
    }
    return std::vector<ir::Tensor>{std::move(*result)};
  }
  for (const std::string& name : CollectiveAxes(op)) {
    if (ir::MeshAxisIndex(mesh(), name) < 0) {
      return absl::InvalidArgumentError(fmt::format("{}: axis \"{}\" is not in mesh {}", opcode,
                                                    name, ir::MeshToString(mesh())));
    }
  }
  if (opcode == "axis_index" || opcode == "axis_size") {
    int64_t value = 1;
    if (opcode == "axis_index") {
      value = CombinedAxisIndex(mesh(), position, op.axis().axes());
    } else {
      for (const std::string& name : op.axis().axes()) {
        value *= mesh().axes(ir::MeshAxisIndex(mesh(), name)).size();
      }
    }
    return std::vector<ir::Tensor>{
        ir::Tensor::FromDoubles({ir::DType::kS32, {}}, {static_cast<double>(value)}, allocator)};
  }
  absl::StatusOr<Ticket> ticket = Arrive(position, op, operands, recorder != nullptr);
  if (!ticket.ok()) return ticket.status();
  if (ir::IsAsyncStart(opcode)) {
    return std::vector<ir::Tensor>{ir::Tensor::Future(ir::FromProto(op.result_types(0)),
                                                      std::make_shared<Pending>(this, *ticket))};
  }
  absl::StatusOr<ir::Tensor> result = Await(*ticket, allocator, recorder);
  if (!result.ok()) return result.status();
  return std::vector<ir::Tensor>{std::move(*result)};
}

absl::StatusOr<RunState::Ticket> RunState::Arrive(int64_t position, const ir::Op& op,
                                                  const std::vector<ir::Tensor>& operands,
                                                  bool record) {
  const ResolvedCollective& resolved = plan_.Resolve(op);
  const absl::StatusOr<CollectiveGroup>& group = resolved.groups[position];
  if (!group.ok()) {
    absl::Status error = absl::InvalidArgumentError(
        fmt::format("{}: {}", op.opcode(), group.status().message()));
    Cancel(error);  // its peers would otherwise wait for it until the timeout
    return error;
  }
  Ticket ticket{0, position, &resolved, &*group, record ? backends::SpanClockNs() : 0};
  std::unique_lock<std::mutex> lock(mu_);
  ++arrivals_;
  ticket.seq = next_seq_[position]++;
  Slot& slot = slots_[ticket.seq];
  Arrival& mine = slot.arrivals[position];
  mine.resolved = &resolved;
  mine.operands = operands;
  for (const ir::Tensor& t : operands) mine.types.push_back(t.type());
  // Anyone of my group already here must agree with me.
  bool all_here = true;
  for (int64_t member : group->members) {
    auto it = slot.arrivals.find(member);
    if (it == slot.arrivals.end()) {
      all_here = false;
      continue;
    }
    if (!Agree(mine, it->second, member, *group)) {
      const Arrival& theirs = it->second;
      absl::Status error =
          absl::FailedPreconditionError(Mismatch(ticket.seq, position, mine, member, theirs));
      lock.unlock();
      Cancel(error);
      return error;
    }
  }
  lock.unlock();
  if (all_here) cv_.notify_all();
  return ticket;
}

absl::StatusOr<ir::Tensor> RunState::Await(const Ticket& ticket, ir::Allocator* allocator,
                                           backends::SpanRecorder* recorder) {
  const int64_t wait_ns = recorder != nullptr ? backends::SpanClockNs() : 0;
  const CollectiveGroup& group = *ticket.group;
  const ir::Op& op = *ticket.resolved->op;
  const int64_t position = ticket.position;
  // Takes the core back after a wait, once mu_ is released (declared first: destroyed last).
  struct Reacquire {
    RunState* run = nullptr;
    int64_t position = 0;
    bool Now() {
      RunState* r = std::exchange(run, nullptr);
      return r == nullptr || r->TakeCore(position);
    }
    ~Reacquire() { Now(); }
  } reacquire;
  std::unique_lock<std::mutex> lock(mu_);
  auto slot_it = slots_.find(ticket.seq);  // holds my arrival until I have read the group's
  if (slot_it == slots_.end() || !slot_it->second.arrivals.count(position)) {
    return absl::InternalError(fmt::format("collective #{} on device {}: arrival lost",
                                           ticket.seq, DeviceOf(position)));
  }
  Slot& slot = slot_it->second;
  auto all_here = [&] {
    for (int64_t member : group.members) {
      if (!slot.arrivals.count(member)) return false;
    }
    return true;
  };
  if (!all_here()) {
    GiveCore(position);
    reacquire = {this, position};
    // Short yielding spin first (cheap when a peer is about to arrive on another core), then
    // block. Not when devices outnumber the cores: yielding spinners would take turns with the
    // devices that compute.
    const int spins = cores_ == nullptr || ir::MeshSize(mesh()) <= cores_->cores() ? 64 : 0;
    for (int spin = 0; spin < spins && !all_here() && !cancelled_; ++spin) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
    auto ready = [&] { return cancelled_.load() || all_here(); };
    bool done = true;
    if (timeout_ == absl::InfiniteDuration()) {
      cv_.wait(lock, ready);
    } else {
      // A window of `timeout_` (capped so that now() + timeout cannot overflow) in which the run
      // made progress is not a failure: with devices taking turns on the cores, peers may still
      // be waiting for theirs.
      const auto window = absl::ToChronoNanoseconds(std::min(timeout_, absl::Hours(24 * 365)));
      auto progress = [&] { return arrivals_ + (cores_ != nullptr ? cores_->grants() : 0); };
      for (uint64_t seen = progress(); !(done = cv_.wait_for(lock, window, ready));) {
        if (progress() == seen) break;
        seen = progress();
      }
    }
    if (!cancelled_ && !done) {
      std::vector<int64_t> missing;
      for (int64_t member : group.members) {
        if (!slot.arrivals.count(member)) missing.push_back(DeviceOf(member));
      }
      absl::Status error = absl::DeadlineExceededError(fmt::format(
          "collective #{} ({}) on device {}: devices [{}] of its group did not arrive within {}",
          ticket.seq, Describe(op, slot.arrivals.at(position).types), DeviceOf(position),
          absl::StrJoin(missing, ","), absl::FormatDuration(timeout_)));
      lock.unlock();
      Cancel(error);
      return error;
    }
  }
  if (recorder != nullptr) {
    recorder->Record(
        {op.opcode(), "wait", wait_ns, backends::SpanClockNs() - wait_ns, op.name_scope()});
  }
  if (cancelled_) {
    return absl::CancelledError(
        fmt::format("device {}: run cancelled: {}", DeviceOf(position), status_.message()));
  }
  const std::string& kind = ticket.resolved->kind;
  // Everyone arrived: check every member's arrival against mine once more (a member that
  // arrived after me checked only the members of its own group).
  const Arrival& mine = slot.arrivals.at(position);
  GroupOperands inputs;
  inputs.my_index = group.my_index;
  inputs.axis_indices = group.axis_indices;
  inputs.inputs.reserve(group.members.size());
  for (int64_t member : group.members) {
    const Arrival& theirs = slot.arrivals.at(member);
    if (!Agree(mine, theirs, member, group)) {
      absl::Status error = absl::FailedPreconditionError(
          Mismatch(ticket.seq, position, mine, member, theirs));
      lock.unlock();
      Cancel(error);
      return error;
    }
    inputs.inputs.push_back(theirs.operands[0]);
  }
  // A ppermute operand has one reader, its target: handed over, so that the target may update
  // it in place once the sender has moved on (a reduce-scatter ring adds into it).
  if (kind == "ppermute") {
    const int64_t me = group.axis_indices[group.my_index];
    for (const ir::PermutePair& pair : op.ppermute().perm()) {
      if (pair.target() != me) continue;
      for (size_t j = 0; j < group.members.size(); ++j) {
        if (group.axis_indices[j] == pair.source()) {
          slot.arrivals.at(group.members[j]).operands[0] = ir::Tensor();
        }
      }
    }
  }
  // An all-reduce gives every member the same result: past kSharedReductionBytes, the group
  // computes it once, each member a share, instead of each member all of it.
  std::shared_ptr<SharedReduction> shared;
  const ir::ShapedType out_type = ir::FromProto(op.result_types(0)).Awaited();
  if ((kind == "psum" || kind == "pmean" || kind == "pmax" || kind == "pmin") &&
      group.members.size() > 1 && out_type.byte_size() >= kSharedReductionBytes) {
    std::shared_ptr<SharedReduction>& entry = slot.shared[group.members.front()];
    if (entry == nullptr) {
      entry = std::make_shared<SharedReduction>();
      entry->out = ir::Tensor::Empty(out_type, allocator);
    }
    shared = entry;
  }
  FinishReading(ticket);
  lock.unlock();
  if (!reacquire.Now()) {
    return absl::CancelledError(
        fmt::format("device {}: run cancelled: {}", DeviceOf(position), status().message()));
  }
  const int64_t data_ns = recorder != nullptr ? backends::SpanClockNs() : 0;
  absl::StatusOr<ir::Tensor> result = shared != nullptr
                                          ? ReduceShared(ticket, inputs, *shared)
                                          : ComputeCollective(op, inputs, allocator);
  if (recorder != nullptr) {
    const std::string name = op.opcode() + " data";
    recorder->Record(
        {name, "collective", data_ns, backends::SpanClockNs() - data_ns, op.name_scope()});
  }
  return result;
}

absl::StatusOr<ir::Tensor> RunState::ReduceShared(const Ticket& ticket,
                                                  const GroupOperands& inputs,
                                                  SharedReduction& shared) {
  const std::string& kind = ticket.resolved->kind;
  const int64_t n = shared.out.num_elements();
  const int64_t members = static_cast<int64_t>(inputs.inputs.size());
  const int64_t begin = n * inputs.my_index / members;
  const int64_t end = n * (inputs.my_index + 1) / members;
  absl::Status s = ReduceRange(inputs.inputs, kind, shared.out, begin, end);
  if (!s.ok()) {
    Cancel(s);  // the others would wait for this share
    return s;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (++shared.finished == members) {
    lock.unlock();
    cv_.notify_all();
    return shared.out;
  }
  GiveCore(ticket.position);
  cv_.wait(lock, [&] { return cancelled_.load() || shared.finished == members; });
  const bool cancelled = shared.finished != members;
  lock.unlock();
  if (!TakeCore(ticket.position) || cancelled) {
    return absl::CancelledError(fmt::format("device {}: run cancelled: {}",
                                            DeviceOf(ticket.position), status().message()));
  }
  return shared.out;
}

void RunState::FinishReading(const Ticket& ticket) {
  auto slot_it = slots_.find(ticket.seq);
  if (slot_it == slots_.end()) return;
  Slot& slot = slot_it->second;
  const std::vector<int64_t>& members = ticket.group->members;
  // The last reader of the group drops the arrivals so operands are not kept alive.
  auto [it, inserted] =
      slot.readers_left.emplace(members.front(), static_cast<int>(members.size()));
  if (--it->second == 0) {
    for (int64_t member : members) slot.arrivals.erase(member);
    slot.readers_left.erase(it);
    slot.shared.erase(members.front());  // its members hold it
    if (slot.arrivals.empty()) slots_.erase(slot_it);
  }
}

void RunState::Abandon(const Ticket& ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  FinishReading(ticket);
}

}  // namespace shardjit::runtime
