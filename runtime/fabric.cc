#include "runtime/fabric.h"

#include <thread>

#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/printer.h"
#include "ir/sharding.h"
#include "ir/types.h"
#include "runtime/collective_groups.h"
#include "runtime/collective_ops.h"

namespace shardjit::runtime {
namespace {

std::string Signature(const ir::Op& op, const std::vector<ir::Tensor>& operands) {
  ir::Op bare = op;
  bare.clear_operands();
  bare.clear_results();
  bare.clear_name_scope();
  bare.clear_loc();
  std::string sig = bare.SerializeAsString();
  for (const ir::Tensor& t : operands) sig += t.type().ToString();
  return sig;
}

std::string Describe(const ir::Op& op, const std::vector<ir::Tensor>& operands) {
  std::string attrs = ir::PrintOp(op);
  std::vector<std::string> types;
  for (const ir::Tensor& t : operands) types.push_back(t.type().ToString());
  return fmt::format("{} on {}", attrs.substr(attrs.find('=') + 2), absl::StrJoin(types, ", "));
}

}  // namespace

RunState::RunState(ir::Mesh mesh, absl::Duration timeout, CoreSemaphore* cores)
    : mesh_(std::move(mesh)),
      timeout_(timeout),
      cores_(cores),
      holds_core_(ir::MeshSize(mesh_), 0),
      next_seq_(ir::MeshSize(mesh_), 0) {}

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

absl::StatusOr<std::vector<ir::Tensor>> RunState::Collective(
    int64_t position, const ir::Op& op, const std::vector<ir::Tensor>& operands,
    ir::Allocator* allocator, backends::SpanRecorder* recorder) {
  for (const std::string& name : CollectiveAxes(op)) {
    if (ir::MeshAxisIndex(mesh_, name) < 0) {
      return absl::InvalidArgumentError(fmt::format("{}: axis \"{}\" is not in mesh {}",
                                                    op.opcode(), name, ir::MeshToString(mesh_)));
    }
  }
  if (op.opcode() == "axis_index" || op.opcode() == "axis_size") {
    int64_t value = 1;
    if (op.opcode() == "axis_index") {
      value = CombinedAxisIndex(mesh_, position, op.axis().axes());
    } else {
      for (const std::string& name : op.axis().axes()) {
        value *= mesh_.axes(ir::MeshAxisIndex(mesh_, name)).size();
      }
    }
    return std::vector<ir::Tensor>{
        ir::Tensor::FromDoubles({ir::DType::kS32, {}}, {static_cast<double>(value)}, allocator)};
  }
  return Rendezvous(position, op, operands, allocator, recorder);
}

absl::StatusOr<std::vector<ir::Tensor>> RunState::Rendezvous(
    int64_t position, const ir::Op& op, const std::vector<ir::Tensor>& operands,
    ir::Allocator* allocator, backends::SpanRecorder* recorder) {
  const int64_t arrival_ns = recorder != nullptr ? backends::SpanClockNs() : 0;
  absl::StatusOr<CollectiveGroup> group =
      GroupOf(mesh_, position, CollectiveAxes(op), CollectiveGroups(op));
  if (!group.ok()) {
    Cancel(group.status());  // its peers would otherwise wait for it until the timeout
    return group.status();
  }
  const int64_t device = mesh_.device_ids_size() ? mesh_.device_ids(position) : position;
  auto device_of = [&](int64_t p) { return mesh_.device_ids_size() ? mesh_.device_ids(p) : p; };

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
  ++arrivals_;
  const int64_t seq = next_seq_[position]++;
  Slot& slot = slots_[seq];
  Arrival& mine = slot.arrivals[position];
  mine.signature = Signature(op, operands);
  mine.members = group->members;
  mine.operands = operands;
  mine.op = &op;
  // Anyone of my group already here must agree with me.
  for (int64_t member : group->members) {
    auto it = slot.arrivals.find(member);
    if (it == slot.arrivals.end() || member == position) continue;
    if (it->second.signature != mine.signature || it->second.members != mine.members) {
      absl::Status error = absl::FailedPreconditionError(
          fmt::format("collective #{} mismatch: device {} runs {} but device {} runs {}", seq,
                      device, Describe(op, operands), device_of(member),
                      Describe(*it->second.op, it->second.operands)));
      lock.unlock();
      Cancel(error);
      return error;
    }
  }
  auto all_here = [&] {
    for (int64_t member : group->members) {
      if (!slot.arrivals.count(member)) return false;
    }
    return true;
  };
  if (all_here()) {
    lock.unlock();
    cv_.notify_all();
    lock.lock();
  } else {
    GiveCore(position);
    reacquire = {this, position};
    // Short yielding spin first (cheap when a peer is about to arrive), then block.
    for (int spin = 0; spin < 64 && !all_here() && !cancelled_; ++spin) {
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
      for (int64_t member : group->members) {
        if (!slot.arrivals.count(member)) missing.push_back(device_of(member));
      }
      absl::Status error = absl::DeadlineExceededError(fmt::format(
          "collective #{} ({}) on device {}: devices [{}] of its group did not arrive within {}",
          seq, Describe(op, operands), device, absl::StrJoin(missing, ","),
          absl::FormatDuration(timeout_)));
      lock.unlock();
      Cancel(error);
      return error;
    }
  }
  if (recorder != nullptr) {
    recorder->Record(
        {op.opcode(), "wait", arrival_ns, backends::SpanClockNs() - arrival_ns, op.name_scope()});
  }
  if (cancelled_) {
    return absl::CancelledError(
        fmt::format("device {}: run cancelled: {}", device, status_.message()));
  }
  // Everyone arrived and agreed: check every member's arrival against mine once more (a member
  // may have arrived after me with a different op).
  GroupOperands inputs;
  inputs.my_index = group->my_index;
  inputs.axis_indices = group->axis_indices;
  for (int64_t member : group->members) {
    const Arrival& a = slot.arrivals.at(member);
    if (a.signature != mine.signature || a.members != mine.members) {
      absl::Status error = absl::FailedPreconditionError(fmt::format(
          "collective #{} mismatch: device {} runs {} but device {} runs {}", seq, device,
          Describe(op, operands), device_of(member), Describe(*a.op, a.operands)));
      lock.unlock();
      Cancel(error);
      return error;
    }
    inputs.inputs.push_back(a.operands[0]);
  }
  // The last reader of the group drops the arrivals so operands are not kept alive.
  int64_t key = group->members.front();
  auto [it, inserted] = slot.readers_left.emplace(key, static_cast<int>(group->members.size()));
  if (--it->second == 0) {
    for (int64_t member : group->members) slot.arrivals.erase(member);
    slot.readers_left.erase(it);
    if (slot.arrivals.empty()) slots_.erase(seq);
  }
  lock.unlock();
  if (!reacquire.Now()) {
    return absl::CancelledError(fmt::format("device {}: run cancelled: {}", device, status().message()));
  }
  const int64_t data_ns = recorder != nullptr ? backends::SpanClockNs() : 0;
  absl::StatusOr<ir::Tensor> result = ComputeCollective(op, inputs, allocator);
  if (recorder != nullptr) {
    const std::string name = op.opcode() + " data";
    recorder->Record(
        {name, "collective", data_ns, backends::SpanClockNs() - data_ns, op.name_scope()});
  }
  if (!result.ok()) return result.status();
  return std::vector<ir::Tensor>{std::move(*result)};
}

}  // namespace shardjit::runtime
