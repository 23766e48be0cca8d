#include "runtime/mailbox.h"

#include "fmt/format.h"
#include "ir/types.h"

namespace shardjit::runtime {

Mailbox::Mailbox(RunCore& core, const CollectivePlan& plan, StallDiagnosis& stall)
    : core_(core), plan_(plan), stall_(stall) {}

absl::StatusOr<std::vector<ir::Tensor>> Mailbox::Send(int64_t position, const ir::Op& op,
                                                     const ir::Tensor& x) {
  const absl::StatusOr<CollectiveGroup>& group = plan_.Resolve(op).groups[position];
  if (!group.ok()) return group.status();
  const int64_t me = group->axis_indices[group->my_index];
  RemotePeers* remote = core_.remote();
  std::vector<int64_t> remote_targets;
  {
    std::lock_guard<SpinMutex> lock(core_.mu());
    core_.CountArrival();
    for (const ir::PermutePair& pair : op.ppermute().perm()) {
      if (pair.source() != me) continue;
      const int64_t target = group->members[pair.target()];
      if (remote != nullptr && !remote->IsLocal(target)) {
        remote_targets.push_back(target);
        continue;
      }
      mail_[{position, target}].push_back(x);  // operands are immutable: no copy
      core_.Wake(target);
    }
  }
  for (int64_t target : remote_targets) remote->PostMail(position, target, x);
  return std::vector<ir::Tensor>{ir::Tensor::Empty({ir::DType::kPred, {0}})};
}

absl::StatusOr<std::vector<ir::Tensor>> Mailbox::Receive(int64_t position, const ir::Op& op,
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
  std::unique_lock<SpinMutex> lock(core_.mu());
  core_.CountArrival();
  std::deque<ir::Tensor>& queue = mail_[{source, position}];
  const RunCore::Waiting what{.source = source};
  if (queue.empty()) stall_.FailIfWaitingOnGone(lock, what);
  core_.ParkUntil(lock, position, what, [&] { return !queue.empty(); });
  if (queue.empty()) {
    lock.unlock();
    return core_.CancelledError(position);
  }
  ir::Tensor x = std::move(queue.front());
  queue.pop_front();
  lock.unlock();
  if (x.type() != type) {
    absl::Status error = absl::FailedPreconditionError(fmt::format(
        "precv on device {} expects {} from device {}, which sent {}", core_.DeviceOf(position),
        type.ToString(), core_.DeviceOf(source), x.type().ToString()));
    core_.Cancel(error, /*post=*/true);
    return error;
  }
  return std::vector<ir::Tensor>{std::move(x)};
}

void Mailbox::Deliver(int64_t source, int64_t target, ir::Tensor x) {
  std::lock_guard<SpinMutex> lock(core_.mu());
  if (core_.cancelled()) return;
  core_.CountArrival();
  mail_[{source, target}].push_back(std::move(x));
  core_.Wake(target);
}

absl::Status Mailbox::CheckAllReceived() const {
  std::lock_guard<SpinMutex> lock(core_.mu());
  for (const auto& [pair, queue] : mail_) {
    if (queue.empty()) continue;
    return absl::FailedPreconditionError(fmt::format(
        "{} psend(s) from device {} to device {} ({} first) were never received: no matching "
        "precv ran",
        queue.size(), core_.DeviceOf(pair.first), core_.DeviceOf(pair.second),
        queue.front().type().ToString()));
  }
  return absl::OkStatus();
}

}  // namespace shardjit::runtime
