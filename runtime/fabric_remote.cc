// The parts of RunState (runtime/fabric.h) that meet other processes (runtime/remote.h): the
// arrivals they deliver, and what a local arrival posts to them (an all_gather's result prepared
// to receive their blocks in place). Their psends, pieces of split all-reduces and leaving are
// handled by mailbox.h, shared_reduction.h and stall.h.
#include <algorithm>

#include "ir/types.h"
#include "runtime/collective_ops.h"
#include "runtime/fabric.h"

namespace shardjit::runtime {

void RunState::DeliverArrival(int64_t seq, int64_t position, const ResolvedCollective* resolved,
                              std::vector<ir::Tensor> operands, std::vector<ir::ShapedType> types,
                              const ElementRange& share) {
  std::lock_guard<SpinMutex> lock(core_.mu());
  if (core_.cancelled()) return;
  core_.CountArrival();
  Slot& slot = rendezvous_.SlotFor(seq);
  Arrival& theirs = Rendezvous::Enter(slot, position, resolved);
  theirs.operands = std::move(operands);
  theirs.types = std::move(types);
  theirs.share = share;
  rendezvous_.WakeCompleteGroups(slot);
}

ir::Tensor RunState::PrepareGatherResult(const ResolvedCollective& resolved,
                                         const CollectiveGroup& group,
                                         const std::vector<ir::Tensor>& operands,
                                         ir::Allocator* allocator) const {
  if (core_.remote() == nullptr || resolved.kind != ir::Prim::kAllGather || operands.size() != 1) {
    return {};
  }
  const bool remote_member = std::any_of(group.members.begin(), group.members.end(),
                                         [&](int64_t m) { return !core_.remote()->IsLocal(m); });
  if (!remote_member || operands[0].num_elements() == 0 ||
      !GatherBlocksAreRuns(operands[0].type(), resolved.op->all_gather().axis())) {
    return {};
  }
  return ir::Tensor::Empty(ir::FromProto(resolved.op->result_types(0)).Awaited(), allocator);
}

void RunState::PostToPeers(const Ticket& ticket, const std::vector<ir::Tensor>& operands,
                           const ir::Tensor& prepared, const ProcessShares& split) {
  const CollectiveGroup& group = *ticket.group;
  RemotePeers* remote = core_.remote();
  const int64_t me = group.axis_indices[group.my_index];
  // A ppermute operand is read by its targets only; every other collective reads every member's.
  std::vector<int64_t> readers;
  std::vector<int64_t> sources;  // the remote members whose operands this position reads
  const bool ppermute = ticket.resolved->kind == ir::Prim::kPpermute;
  if (ppermute) {
    for (const ir::PermutePair& pair : ticket.resolved->op->ppermute().perm()) {
      if (pair.source() == me) readers.push_back(group.members[pair.target()]);
      if (pair.target() == me && !remote->IsLocal(group.members[pair.source()])) {
        sources.push_back(group.members[pair.source()]);
      }
    }
  }
  std::vector<int> processes;
  std::vector<bool> with_data;
  for (int64_t member : group.members) {
    if (remote->IsLocal(member)) continue;
    if (!ppermute) sources.push_back(member);
    const int process = remote->ProcessOf(member);
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
    remote->ExpectOperands(ticket.seq, sources, types, destinations,
                            split.ShareOf(remote->ProcessOf(ticket.position)));
  }
  if (!processes.empty()) {
    std::vector<ElementRange> shares;
    if (!split.processes.empty()) {
      for (int process : processes) shares.push_back(split.ShareOf(process));
    }
    remote->PostArrival(ticket.seq, ticket.position, *ticket.resolved, operands, processes,
                         with_data, shares);
  }
}

}  // namespace shardjit::runtime
