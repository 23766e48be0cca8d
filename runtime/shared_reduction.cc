#include "runtime/shared_reduction.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "fmt/format.h"
#include "ir/prim.h"
#include "ir/types.h"

namespace shardjit::runtime {
namespace {

// All-reduce results from this size on are computed once per group, a share per local member.
constexpr int64_t kSharedReductionBytes = 64 << 10;
// All-reduces over members in several processes from this size on are split among the
// processes: below it, the second round of messages costs more than the reduction it saves.
constexpr int64_t kSplitReductionBytes = 2 << 20;
// A shared result is written, and a split one's share sent, in pieces of at most this size: a
// piece travels while the next is reduced.
constexpr int64_t kReducedPieceBytes = 4 << 20;

}  // namespace

SharedReductions::SharedReductions(RunCore& core, const backends::Backend& backend,
                                   StallDiagnosis& stall)
    : core_(core), backend_(backend), stall_(stall) {}

ProcessShares SharedReductions::SplitAcrossProcesses(
    const ResolvedCollective& resolved, const CollectiveGroup& group,
    const std::vector<ir::Tensor>& operands) const {
  ProcessShares split;
  RemotePeers* remote = core_.remote();
  if (remote == nullptr || !ir::IsAllReduce(resolved.kind) || operands.size() != 1) return split;
  const ir::ShapedType out = ir::FromProto(resolved.op->result_types(0)).Awaited();
  const int64_t n = out.num_elements();
  if (out.byte_size() < kSplitReductionBytes || operands[0].num_elements() != n) return split;
  for (int64_t member : group.members) {
    const int process = remote->ProcessOf(member);
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

template <typename Visit>
void SharedReductions::ForEachSharePiece(const CollectiveGroup& group, int process,
                                         const ElementRange& share, int64_t elem_bytes,
                                         int64_t member, Visit visit) const {
  RemotePeers* remote = core_.remote();
  int64_t members = 0;
  for (int64_t m : group.members) {
    members += remote == nullptr || remote->ProcessOf(m) == process ? 1 : 0;
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

std::shared_ptr<SharedReduction> SharedReductions::BeginSplit(Slot& slot, const Ticket& ticket,
                                                              const ProcessShares& split,
                                                              ir::Tensor& out) {
  const int64_t key = ticket.group->members.front();
  if (split.processes.empty() || slot.shared[key] != nullptr) return nullptr;
  auto shared = std::make_shared<SharedReduction>();
  shared->out = std::move(out);
  shared->group = ticket.group;
  const int me = core_.remote()->ProcessOf(ticket.position);
  for (size_t i = 0; i < split.processes.size(); ++i) {
    if (split.processes[i] == me) {
      shared->mine = split.shares[i];
      continue;
    }
    shared->others.push_back(split.processes[i]);
    shared->their_shares.push_back(split.shares[i]);
    shared->received.push_back(0);
    shared->missing += split.shares[i].size();
  }
  slot.shared[key] = shared;
  receiving_[{ticket.seq, key}] = shared;
  return shared;
}

void SharedReductions::ExpectPieces(const Ticket& ticket, const SharedReduction& shared) const {
  const CollectiveGroup& group = *ticket.group;
  const int64_t elem = ir::DTypeSize(shared.out.dtype());
  for (size_t i = 0; i < shared.others.size(); ++i) {
    ForEachSharePiece(group, shared.others[i], shared.their_shares[i], elem, -1,
                      [&](const ElementRange& piece) {
                        core_.remote()->ExpectReduced(ticket.seq, group.members.front(),
                                                      shared.others[i], shared.out, piece);
                      });
  }
}

std::shared_ptr<SharedReduction> SharedReductions::ForGroup(Slot& slot, const Ticket& ticket,
                                                            ir::Allocator* allocator) const {
  if (!ir::IsAllReduce(ticket.resolved->kind)) return nullptr;
  const CollectiveGroup& group = *ticket.group;
  std::shared_ptr<SharedReduction>& entry = slot.shared[group.members.front()];
  const ir::TensorType& out_proto = ticket.resolved->op->result_types(0);
  int64_t bytes = ir::DTypeSize(ir::FromProto(out_proto.dtype()));
  for (int64_t d : out_proto.dims()) bytes *= d;
  if (entry == nullptr && core_.LocalMembers(group) > 1 && bytes >= kSharedReductionBytes) {
    entry = std::make_shared<SharedReduction>();
    entry->out = ir::Tensor::Empty(ir::FromProto(out_proto).Awaited(), allocator);
    entry->mine = {0, entry->out.num_elements()};
    entry->group = &group;
  }
  return entry;
}

absl::Status SharedReductions::TakeShares(const Slot& slot, const Ticket& ticket,
                                          const SharedReduction* shared,
                                          GroupOperands& inputs) const {
  inputs.firsts.clear();
  RemotePeers* remote = core_.remote();
  if (remote == nullptr) return absl::OkStatus();  // only other processes send shares
  const bool split = shared != nullptr && !shared->others.empty();
  for (int64_t member : ticket.group->members) {
    const ElementRange& got = slot.arrivals[member].share;
    const bool share_expected = split && !remote->IsLocal(member);
    if (share_expected ? got.begin != shared->mine.begin || got.end != shared->mine.end
                       : got.size() != 0) {
      return absl::FailedPreconditionError(fmt::format(
          "collective #{} ({}) on device {}: device {} sent elements [{}, {}) of its operand, "
          "where this process reads {}: the processes split the all-reduce differently",
          ticket.seq, ticket.resolved->op->opcode(), core_.DeviceOf(ticket.position),
          core_.DeviceOf(member), got.begin, got.end,
          share_expected ? fmt::format("[{}, {})", shared->mine.begin, shared->mine.end)
                         : std::string("all of it")));
    }
    if (split) inputs.firsts.push_back(got.begin);
  }
  return absl::OkStatus();
}

absl::StatusOr<ir::Tensor> SharedReductions::Reduce(const Ticket& ticket,
                                                    const GroupOperands& inputs,
                                                    SharedReduction& shared) {
  const ir::Prim kind = ticket.resolved->kind;
  const CollectiveGroup& group = *ticket.group;
  RemotePeers* remote = core_.remote();
  // The members in this process share the work (all of them but in one process).
  int64_t members = 0;
  int64_t share = 0;
  for (int64_t member : group.members) {
    if (remote != nullptr && !remote->IsLocal(member)) continue;
    if (member == ticket.position) share = members;
    ++members;
  }
  const int process = remote != nullptr ? remote->ProcessOf(ticket.position) : 0;
  absl::Status reduced;
  ForEachSharePiece(group, process, shared.mine, ir::DTypeSize(shared.out.dtype()), share,
                    [&](const ElementRange& piece) {
                      if (!reduced.ok()) return;
                      reduced = ReduceRange(inputs.inputs, kind, backend_, shared.out, piece.begin,
                                            piece.end, inputs.firsts);
                      if (reduced.ok() && !shared.others.empty()) {
                        remote->PostReduced(ticket.seq, group.members.front(), shared.out, piece,
                                            shared.others);
                      }
                    });
  if (!reduced.ok()) {
    core_.Cancel(reduced, /*post=*/true);  // the others would wait for this share
    return reduced;
  }
  std::unique_lock<SpinMutex> lock(core_.mu());
  ++shared.finished;
  if (shared.Done(members)) {
    for (int64_t member : group.members) core_.Wake(member);
    return shared.out;
  }
  // Split: waits for the other processes' shares too.
  const SharedReduction* split = shared.others.empty() ? nullptr : &shared;
  const RunCore::Waiting what{.ticket = split != nullptr ? &ticket : nullptr, .reduced = split};
  if (split != nullptr && stall_.FailIfWaitingOnGone(lock, what)) {
    lock.unlock();
    return core_.CancelledError(ticket.position);
  }
  core_.ParkUntil(lock, ticket.position, what, [&] { return shared.Done(members); });
  if (!shared.Done(members)) {
    lock.unlock();
    return core_.CancelledError(ticket.position);
  }
  return shared.out;
}

void SharedReductions::Deliver(int process, int64_t seq, int64_t key, const ElementRange& piece,
                               const ir::Tensor& x) {
  std::shared_ptr<SharedReduction> shared;
  size_t from = 0;  // index of `process` in shared->others
  {
    std::unique_lock<SpinMutex> lock(core_.mu());
    if (core_.cancelled()) return;
    auto it = receiving_.find({seq, key});
    std::string wrong;
    if (it == receiving_.end()) {
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
      core_.Cancel(
          absl::DataLossError(fmt::format(
              "process {} sent elements [{}, {}) of collective #{}'s all-reduce result ({}) for "
              "the group of device {}, which this process does not expect: {} (a mismatched "
              "program?)",
              process, piece.begin, piece.end, seq, x.type().ToString(), core_.DeviceOf(key),
              wrong)),
          /*post=*/false);
      return;
    }
  }
  // Received in place, or copied there (without the lock: only this piece writes there).
  const int64_t elem = ir::DTypeSize(x.dtype());
  char* to = static_cast<char*>(shared->out.data()) + piece.begin * elem;
  const char* data = static_cast<const char*>(x.data()) +
                     (x.num_elements() == piece.size() ? 0 : piece.begin * elem);
  if (to != data) std::memcpy(to, data, piece.size() * elem);
  std::lock_guard<SpinMutex> lock(core_.mu());
  core_.CountArrival();
  shared->received[from] += piece.size();
  shared->missing -= piece.size();
  if (shared->missing == 0) {
    for (int64_t member : shared->group->members) core_.Wake(member);
    receiving_.erase({seq, key});
  }
}

}  // namespace shardjit::runtime
