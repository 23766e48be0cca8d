// The parts of RunState (runtime/fabric.h) that meet other processes (runtime/remote.h): what
// they deliver (arrivals, psends, pieces of split all-reduces, their leaving), what a local
// arrival posts to them, and how an all-reduce is split among them.
#include <algorithm>
#include <cstring>

#include "fmt/format.h"
#include "ir/types.h"
#include "runtime/collective_ops.h"
#include "runtime/fabric.h"

namespace shardjit::runtime {
namespace {

// All-reduces over members in several processes from this size on are split among the processes
// (remote.h): each receives and reduces a share instead of every operand whole.
constexpr int64_t kSplitReductionBytes = 2 << 20;

}  // namespace

void RunState::DeliverArrival(int64_t seq, int64_t position, const ResolvedCollective* resolved,
                              std::vector<ir::Tensor> operands, std::vector<ir::ShapedType> types,
                              const ElementRange& share) {
  std::lock_guard<SpinMutex> lock(mu_);
  if (cancelled_) return;
  ++arrivals_;
  Slot& slot = SlotFor(seq);
  Arrival& theirs = slot.arrivals[position];
  theirs.present = true;
  ++slot.present;
  theirs.resolved = resolved;
  theirs.operands = std::move(operands);
  theirs.types = std::move(types);
  theirs.share = share;
  WakeCompleteGroups(slot);
}

void RunState::MarkGone(const std::vector<int64_t>& positions, const absl::Status& why) {
  std::unique_lock<SpinMutex> lock(mu_);
  if (gone_status_.ok()) gone_status_ = why;
  for (int64_t p : positions) gone_[p] = true;
  for (int64_t p = 0; p < size_; ++p) {
    if (waiting_[p].task == nullptr) continue;
    if (FailIfWaitingOnGone(lock, waiting_[p].ticket, receiving_from_[p], waiting_[p].reduced)) {
      return;
    }
  }
}

bool RunState::FailIfWaitingOnGone(std::unique_lock<SpinMutex>& lock, const Ticket* ticket,
                                   int64_t source, const SharedReduction* reduced) {
  if (gone_status_.ok() || cancelled_) return false;
  bool waits = source >= 0 && gone_[source];
  if (reduced != nullptr) {
    for (int64_t member : reduced->group->members) {
      if (!gone_[member]) continue;
      const auto it = std::find(reduced->others.begin(), reduced->others.end(),
                                remote_->ProcessOf(member));
      const size_t i = it - reduced->others.begin();
      waits = waits || (it != reduced->others.end() &&
                        reduced->received[i] < reduced->their_shares[i].size());
    }
  } else if (ticket != nullptr) {
    const Slot* slot = FindSlot(ticket->seq);
    for (int64_t member : ticket->group->members) {
      waits = waits || (gone_[member] && (slot == nullptr || !slot->arrivals[member].present));
    }
  }
  if (!waits) return false;
  absl::Status why = gone_status_;
  lock.unlock();
  CancelRun(why, /*post=*/false);  // every process hears the goodbye itself
  lock.lock();
  return true;
}

void RunState::DeliverReduced(int process, int64_t seq, int64_t key, const ElementRange& piece,
                              const ir::Tensor& x) {
  std::shared_ptr<SharedReduction> shared;
  size_t from = 0;  // index of `process` in shared->others
  {
    std::unique_lock<SpinMutex> lock(mu_);
    if (cancelled_) return;
    auto it = receiving_reduced_.find({seq, key});
    std::string wrong;
    if (it == receiving_reduced_.end()) {
      wrong = "no split all-reduce of that group is receiving";
    } else {
      shared = it->second;
      from = std::find(shared->others.begin(), shared->others.end(), process) -
             shared->others.begin();
      if (from == shared->others.size()) {
        wrong = "that process takes no part in it";
      } else {
        const ElementRange& theirs = shared->their_shares[from];
        if (piece.begin < theirs.begin || piece.end > theirs.end || piece.begin >= piece.end ||
            shared->received[from] + piece.size() > theirs.size()) {
          wrong = fmt::format("its share is [{}, {}), {} elements of which came before",
                              theirs.begin, theirs.end, shared->received[from]);
        } else if (x.dtype() != shared->out.dtype() ||
                   (x.num_elements() != shared->out.num_elements() &&
                    x.num_elements() != piece.size())) {
          wrong = fmt::format("the result is {}", shared->out.type().ToString());
        }
      }
    }
    if (!wrong.empty()) {
      lock.unlock();
      CancelFromPeer(absl::DataLossError(fmt::format(
          "process {} sent elements [{}, {}) of collective #{}'s all-reduce result ({}) for the "
          "group of device {}, which this process does not expect: {} (a mismatched program?)",
          process, piece.begin, piece.end, seq, x.type().ToString(), DeviceOf(key), wrong)));
      return;
    }
  }
  // Received in place, or copied there (without the lock: only this piece writes there).
  const int64_t elem = ir::DTypeSize(x.dtype());
  char* to = static_cast<char*>(shared->out.data()) + piece.begin * elem;
  const char* data = static_cast<const char*>(x.data()) +
                     (x.num_elements() == piece.size() ? 0 : piece.begin * elem);
  if (to != data) std::memcpy(to, data, piece.size() * elem);
  std::lock_guard<SpinMutex> lock(mu_);
  ++arrivals_;
  shared->received[from] += piece.size();
  shared->missing -= piece.size();
  if (shared->missing == 0) {
    for (int64_t member : shared->group->members) WakePosition(member);
    receiving_reduced_.erase({seq, key});
  }
}

void RunState::DeliverMail(int64_t source, int64_t target, ir::Tensor x) {
  std::lock_guard<SpinMutex> lock(mu_);
  if (cancelled_) return;
  ++arrivals_;
  mail_[{source, target}].push_back(std::move(x));
  WakePosition(target);
}


ir::Tensor RunState::PrepareGatherResult(const ResolvedCollective& resolved,
                                         const CollectiveGroup& group,
                                         const std::vector<ir::Tensor>& operands,
                                         ir::Allocator* allocator) const {
  if (remote_ == nullptr || resolved.kind != ir::Prim::kAllGather || operands.size() != 1) {
    return {};
  }
  const bool remote_member = std::any_of(group.members.begin(), group.members.end(),
                                         [&](int64_t m) { return !remote_->IsLocal(m); });
  if (!remote_member || operands[0].num_elements() == 0 ||
      !GatherBlocksAreRuns(operands[0].type(), resolved.op->all_gather().axis())) {
    return {};
  }
  return ir::Tensor::Empty(ir::FromProto(resolved.op->result_types(0)).Awaited(), allocator);
}


RunState::ProcessShares RunState::SplitAcrossProcesses(
    const ResolvedCollective& resolved, const CollectiveGroup& group,
    const std::vector<ir::Tensor>& operands) const {
  ProcessShares split;
  if (remote_ == nullptr || !ir::IsAllReduce(resolved.kind) || operands.size() != 1) return split;
  const ir::ShapedType out = ir::FromProto(resolved.op->result_types(0)).Awaited();
  const int64_t n = out.num_elements();
  if (out.byte_size() < kSplitReductionBytes || operands[0].num_elements() != n) return split;
  for (int64_t member : group.members) {
    const int process = remote_->ProcessOf(member);
    if (std::find(split.processes.begin(), split.processes.end(), process) ==
        split.processes.end()) {
      split.processes.push_back(process);
    }
  }
  const int64_t p = static_cast<int64_t>(split.processes.size());
  if (p < 2 || n < p) return {};
  for (int64_t i = 0; i < p; ++i) split.shares.push_back({n * i / p, n * (i + 1) / p});
  return split;
}

void RunState::PostToPeers(const Ticket& ticket, const std::vector<ir::Tensor>& operands,
                           const ir::Tensor& prepared, const ProcessShares& split) {
  const CollectiveGroup& group = *ticket.group;
  const int64_t me = group.axis_indices[group.my_index];
  // A ppermute operand is read by its targets only; every other collective reads every member's.
  std::vector<int64_t> readers;
  std::vector<int64_t> sources;  // the remote members whose operands this position reads
  const bool ppermute = ticket.resolved->kind == ir::Prim::kPpermute;
  if (ppermute) {
    for (const ir::PermutePair& pair : ticket.resolved->op->ppermute().perm()) {
      if (pair.source() == me) readers.push_back(group.members[pair.target()]);
      if (pair.target() == me && !remote_->IsLocal(group.members[pair.source()])) {
        sources.push_back(group.members[pair.source()]);
      }
    }
  }
  std::vector<int> processes;
  std::vector<bool> with_data;
  for (int64_t member : group.members) {
    if (remote_->IsLocal(member)) continue;
    if (!ppermute) sources.push_back(member);
    const int process = remote_->ProcessOf(member);
    const bool reads =
        !ppermute || std::find(readers.begin(), readers.end(), member) != readers.end();
    auto it = std::find(processes.begin(), processes.end(), process);
    if (it == processes.end()) {
      processes.push_back(process);
      with_data.push_back(reads);
    } else if (reads) {
      with_data[it - processes.begin()] = true;
    }
  }
  // Ready to receive first, so that the peers' operands leave as soon as they are posted.
  if (!sources.empty()) {
    std::vector<ir::ShapedType> types;
    for (const ir::Tensor& x : operands) types.push_back(x.type());
    std::vector<ir::Tensor> destinations;
    if (prepared.defined()) {
      for (int64_t source : sources) {
        const int64_t j = std::find(group.members.begin(), group.members.end(), source) -
                          group.members.begin();
        destinations.push_back(GatherBlock(prepared, j, types[0]));
      }
    }
    remote_->ExpectOperands(ticket.seq, sources, types, destinations,
                            split.ShareOf(remote_->ProcessOf(ticket.position)));
  }
  if (!processes.empty()) {
    std::vector<ElementRange> shares;
    if (!split.processes.empty()) {
      for (int process : processes) shares.push_back(split.ShareOf(process));
    }
    remote_->PostArrival(ticket.seq, ticket.position, *ticket.resolved, operands, processes,
                         with_data, shares);
  }
}

absl::Status RunState::TakeShares(const Slot& slot, const Ticket& ticket,
                                  const SharedReduction* shared, GroupOperands& inputs) const {
  inputs.firsts.clear();
  if (remote_ == nullptr) return absl::OkStatus();  // only other processes send shares
  const bool split = shared != nullptr && !shared->others.empty();
  for (int64_t member : ticket.group->members) {
    const ElementRange& got = slot.arrivals[member].share;
    const bool share_expected = split && !remote_->IsLocal(member);
    if (share_expected ? got.begin != shared->mine.begin || got.end != shared->mine.end
                       : got.size() != 0) {
      return absl::FailedPreconditionError(fmt::format(
          "collective #{} ({}) on device {}: device {} sent elements [{}, {}) of its operand, "
          "where this process reads {}: the processes split the all-reduce differently",
          ticket.seq, ticket.resolved->op->opcode(), DeviceOf(ticket.position), DeviceOf(member),
          got.begin, got.end,
          share_expected ? fmt::format("[{}, {})", shared->mine.begin, shared->mine.end)
                         : std::string("all of it")));
    }
    if (split) inputs.firsts.push_back(got.begin);
  }
  return absl::OkStatus();
}

}  // namespace shardjit::runtime
