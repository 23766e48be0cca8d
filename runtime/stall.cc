#include "runtime/stall.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "runtime/shared_reduction.h"

namespace shardjit::runtime {

StallDiagnosis::StallDiagnosis(RunCore& core, const Rendezvous& rendezvous,
                               const KernelExchange& kernels)
    : core_(core), rendezvous_(rendezvous), kernels_(kernels), gone_(core.size(), false) {}

bool StallDiagnosis::FailStalled(absl::Duration waited) {
  std::unique_lock<SpinMutex> lock(core_.mu());
  if (core_.cancelled()) return false;
  const int64_t size = core_.size();
  // A precv waiting for its psend.
  for (int64_t p = 0; p < size; ++p) {
    if (const int64_t source = core_.waiting(p).source; source >= 0) {
      absl::Status error = absl::DeadlineExceededError(
          fmt::format("precv on device {} waited {} for a psend from device {} that never came",
                      core_.DeviceOf(p), absl::FormatDuration(waited), core_.DeviceOf(source)));
      lock.unlock();
      core_.Cancel(error, /*post=*/true);
      return true;
    }
  }
  // A split all-reduce waiting for the shares other processes reduce.
  for (int64_t p = 0; p < size; ++p) {
    const SharedReduction* reduced = core_.waiting(p).reduced;
    if (reduced == nullptr || reduced->missing == 0) continue;
    std::vector<int> missing;
    for (size_t i = 0; i < reduced->others.size(); ++i) {
      if (reduced->received[i] < reduced->their_shares[i].size()) {
        missing.push_back(reduced->others[i]);
      }
    }
    const Ticket& ticket = *core_.waiting(p).ticket;
    absl::Status error = absl::DeadlineExceededError(fmt::format(
        "collective #{} ({}) on device {}: the shares of its all-reduce that processes [{}] "
        "reduce did not come within {}",
        ticket.seq, ticket.resolved->op->opcode(), core_.DeviceOf(p), absl::StrJoin(missing, ","),
        absl::FormatDuration(waited)));
    lock.unlock();
    core_.Cancel(error, /*post=*/true);
    return true;
  }
  // A kernel waiting on a semaphore or for a peer's instance.
  for (int64_t p = 0; p < size; ++p) {
    if (const KernelWait* wait = core_.waiting(p).kernel; wait != nullptr) {
      absl::Status error = kernels_.StallError(p, *wait, waited);
      lock.unlock();
      core_.Cancel(error, /*post=*/true);
      return true;
    }
  }
  // A collective waiting for members of its group.
  RemotePeers* remote = core_.remote();
  for (int64_t p = 0; p < size; ++p) {
    const Ticket* ticket = core_.waiting(p).ticket;
    if (ticket == nullptr || core_.waiting(p).reduced != nullptr) continue;
    const Slot* slot = rendezvous_.Find(ticket->seq);
    if (slot == nullptr) continue;
    std::vector<int64_t> missing;
    for (int64_t member : ticket->group->members) {
      if (!slot->arrivals[member].present) missing.push_back(core_.DeviceOf(member));
    }
    if (missing.empty()) continue;
    std::string where;
    if (remote != nullptr) {
      std::set<int> processes;
      for (int64_t member : ticket->group->members) {
        if (!slot->arrivals[member].present) processes.insert(remote->ProcessOf(member));
      }
      where = fmt::format(" (run by process {})", absl::StrJoin(processes, ", "));
    }
    absl::Status error = absl::DeadlineExceededError(fmt::format(
        "collective #{} ({}) on device {}: devices [{}]{} of its group did not arrive within {}",
        ticket->seq, DescribeCollective(*ticket->resolved->op, slot->arrivals[p].types),
        core_.DeviceOf(p), absl::StrJoin(missing, ","), where, absl::FormatDuration(waited)));
    lock.unlock();
    core_.Cancel(error, /*post=*/true);
    return true;
  }
  return false;
}

void StallDiagnosis::MarkGone(const std::vector<int64_t>& positions, const absl::Status& why) {
  std::unique_lock<SpinMutex> lock(core_.mu());
  if (gone_status_.ok()) gone_status_ = why;
  for (int64_t p : positions) gone_[p] = true;
  for (int64_t p = 0; p < core_.size(); ++p) {
    if (core_.waiting(p).task == nullptr) continue;
    const RunCore::Waiting what = core_.waiting(p);  // a copy: the lock is released if it fails
    if (FailIfWaitingOnGone(lock, what)) return;
  }
}

bool StallDiagnosis::FailIfWaitingOnGone(std::unique_lock<SpinMutex>& lock,
                                         const RunCore::Waiting& what) {
  if (gone_status_.ok() || core_.cancelled()) return false;
  // (A kernel's semaphore wait is not here: any device may signal it, and a process that left
  // after its part of the run is not missed; the watchdog names the semaphore if none comes.)
  bool waits = what.source >= 0 && gone_[what.source];
  if (const SharedReduction* reduced = what.reduced; reduced != nullptr) {
    for (int64_t member : reduced->group->members) {
      if (!gone_[member]) continue;
      const auto it = std::find(reduced->others.begin(), reduced->others.end(),
                                core_.remote()->ProcessOf(member));
      const size_t i = it - reduced->others.begin();
      waits = waits || (it != reduced->others.end() &&
                        reduced->received[i] < reduced->their_shares[i].size());
    }
  } else if (const Ticket* ticket = what.ticket; ticket != nullptr) {
    const Slot* slot = rendezvous_.Find(ticket->seq);
    for (int64_t member : ticket->group->members) {
      waits = waits || (gone_[member] && (slot == nullptr || !slot->arrivals[member].present));
    }
  }
  if (!waits) return false;
  absl::Status why = gone_status_;
  lock.unlock();
  core_.Cancel(why, /*post=*/false);
  lock.lock();
  return true;
}

}  // namespace shardjit::runtime
