// All-reduces whose members share the work. Every member of an all-reduce gets the same result, so
// from kSharedReductionBytes on the local members of a group compute it once, each reducing a
// share of its elements into one buffer that all of them then return (read-only, like a ppermute
// result). A large all-reduce whose group spans processes is also split among the processes
// (runtime/remote.h): each process receives only its share of the other processes' operands,
// reduces it, and sends the reduced pieces to the others, receiving theirs into the same buffer.
// State is guarded by RunCore::mu() (run_core.h) where marked.
#ifndef SHARDJIT_RUNTIME_SHARED_REDUCTION_H_
#define SHARDJIT_RUNTIME_SHARED_REDUCTION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/executable.h"
#include "ir/tensor.h"
#include "runtime/collective_ops.h"
#include "runtime/collective_plan.h"
#include "runtime/remote.h"
#include "runtime/rendezvous.h"
#include "runtime/run_core.h"
#include "runtime/stall.h"

namespace shardjit::runtime {

// An all-reduce result the members of a group share. Split across processes, this process's
// members reduce elements `mine` and the rest comes from the other processes.
struct SharedReduction {
  ir::Tensor out;
  ElementRange mine;
  int64_t finished = 0;  // local members whose part is written; under mu
  // Split: the other processes of the group, their shares, and the elements of each received so
  // far; under mu.
  std::vector<int> others;
  std::vector<ElementRange> their_shares;
  std::vector<int64_t> received;
  int64_t missing = 0;  // elements of the others' shares not yet received
  const CollectiveGroup* group = nullptr;
  bool Done(int64_t members) const { return finished == members && missing == 0; }
};

// How a split all-reduce divides its result: process `processes[i]` of the group reduces
// `shares[i]` (empty `processes`: not split).
struct ProcessShares {
  std::vector<int> processes;
  std::vector<ElementRange> shares;
  // The share of `process` (empty when it is not one of them).
  ElementRange ShareOf(int process) const {
    for (size_t i = 0; i < processes.size(); ++i) {
      if (processes[i] == process) return shares[i];
    }
    return {};
  }
};

class SharedReductions {
 public:
  // Reduces on `backend`'s kernels.
  SharedReductions(RunCore& core, const backends::Backend& backend, StallDiagnosis& stall);

  // Whether the all-reduce `resolved` over `group` is split across processes, and how.
  ProcessShares SplitAcrossProcesses(const ResolvedCollective& resolved,
                                     const CollectiveGroup& group,
                                     const std::vector<ir::Tensor>& operands) const;
  // The first local member's arrival at a split all-reduce begins its result in `slot`, taking
  // `out` (allocated by the caller without the lock); null, `out` untouched, if not `split` or
  // another member began it. Under mu.
  std::shared_ptr<SharedReduction> BeginSplit(Slot& slot, const Ticket& ticket,
                                              const ProcessShares& split, ir::Tensor& out);
  // Tells the transport where the other processes' pieces of `shared` go, before this process's
  // operands leave (their shares need them). Without the lock.
  void ExpectPieces(const Ticket& ticket, const SharedReduction& shared) const;
  // The result the ticket's group shares in `slot`: the split one begun at arrival, or one begun
  // now for an all-reduce of several local members past kSharedReductionBytes; null: each member
  // computes its own. Under mu.
  std::shared_ptr<SharedReduction> ForGroup(Slot& slot, const Ticket& ticket,
                                            ir::Allocator* allocator) const;
  // Fills `inputs.firsts` for a split all-reduce: an error if a remote member's arrival holds
  // other elements of its operand than this process reads, or any arrival holds a share where
  // none is read (processes that split differently). Under mu.
  absl::Status TakeShares(const Slot& slot, const Ticket& ticket, const SharedReduction* shared,
                          GroupOperands& inputs) const;
  // Writes the ticket's member's share of `shared` (sending its pieces to the other processes of
  // a split one) and waits for the others'. Takes mu.
  absl::StatusOr<ir::Tensor> Reduce(const Ticket& ticket, const GroupOperands& inputs,
                                    SharedReduction& shared);
  // Elements `piece` of a split all-reduce's result from `process` (RunState::DeliverReduced).
  // Takes mu.
  void Deliver(int process, int64_t seq, int64_t key, const ElementRange& piece,
               const ir::Tensor& x);

 private:
  // Calls visit(piece) for the pieces in which the members of `group` in `process` reduce and
  // send its share of a split all-reduce of `elem_bytes`-byte elements: those of its `member`-th
  // local member, or of all of them when `member` < 0. Allocates nothing.
  template <typename Visit>
  void ForEachSharePiece(const CollectiveGroup& group, int process, const ElementRange& share,
                         int64_t elem_bytes, int64_t member, Visit visit) const;

  RunCore& core_;
  const backends::Backend& backend_;
  StallDiagnosis& stall_;
  // Split all-reduces still receiving the other processes' shares, by (seq, first member); under
  // mu.
  std::map<std::pair<int64_t, int64_t>, std::shared_ptr<SharedReduction>> receiving_;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_SHARED_REDUCTION_H_
