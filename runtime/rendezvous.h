// Where the devices of a run meet at collectives: the k-th collective a position starts meets the
// k-th of every member of its group in slot k. A slot holds each position's arrival (its operands
// and their types) until every local member of its group has read them, then goes back to a free
// list; the slots of a finished run go to a SlotCache for the next run, so a warm run allocates
// no slots. Also checks that the members of a group agree on the collective.
// Everything here is guarded by RunCore::mu() (run_core.h) unless it says otherwise.
#ifndef SHARDJIT_RUNTIME_RENDEZVOUS_H_
#define SHARDJIT_RUNTIME_RENDEZVOUS_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"
#include "runtime/collective_plan.h"
#include "runtime/remote.h"
#include "runtime/run_core.h"

namespace shardjit::runtime {

// One local position's arrival at a collective, held by its device until it awaits the group.
struct Ticket {
  int64_t seq = 0;
  int64_t position = 0;
  const ResolvedCollective* resolved = nullptr;
  const CollectiveGroup* group = nullptr;
  int64_t arrival_ns = 0;  // when it arrived, if spans are recorded
};

// A position's arrival (local or delivered from another process) in a slot.
struct Arrival {
  bool present = false;
  const ResolvedCollective* resolved = nullptr;  // lives as long as the run
  std::vector<ir::Tensor> operands;  // a ppermute's is handed to its target when it reads it
  std::vector<ir::ShapedType> types;  // of the operands, for agreement checks and errors
  // A local all_gather's result, allocated at arrival so that the operands of members in other
  // processes are received into their places in it (undefined otherwise).
  ir::Tensor prepared;
  // A remote member's arrival at a split all-reduce: the elements of its operand sent (the
  // receiving process's share), which operands[0] holds; empty: all of them.
  ElementRange share;
};

// All arrivals for the k-th collective of the run. Vectors are indexed by mesh position (a
// group's entries by its first member) and keep their capacity when the slot is recycled.
struct Slot {
  std::vector<Arrival> arrivals;
  int64_t present = 0;
  std::vector<int> readers_left;  // per group; 0: no reader counted yet
  std::vector<std::shared_ptr<SharedReduction>> shared;  // per group (shared_reduction.h)
  std::vector<int64_t> waiters;  // positions parked in WaitForGroup on this slot
};

// Slots of finished runs, kept by the runtime so that a run reuses the last one's buffers.
struct SlotCache {
  std::mutex mu;
  std::vector<std::unique_ptr<Slot>> slots;
};

// "psum[axes=(x)] on f32[2]": `op` with its attributes and operand types, for errors.
std::string DescribeCollective(const ir::Op& op, const std::vector<ir::ShapedType>& operand_types);

class Rendezvous {
 public:
  // Takes the slots of `cache` (optional, its own mutex) and gives them back when destroyed.
  Rendezvous(RunCore& core, SlotCache* cache);
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  // The sequence number of `position`'s next collective.
  int64_t NextSeq(int64_t position) { return next_seq_[position]++; }
  // The live slot of collective `seq`, or null.
  Slot* Find(int64_t seq);
  const Slot* Find(int64_t seq) const;
  // The slot of collective `seq`, taken from the free list (or made) if none is live.
  Slot& SlotFor(int64_t seq);
  // Marks `position` arrived at `slot` with `resolved`; the caller fills the rest of the arrival.
  static Arrival& Enter(Slot& slot, int64_t position, const ResolvedCollective* resolved);

  // Whether every member of `group` has arrived in `slot`.
  static bool GroupHere(const Slot& slot, const CollectiveGroup& group);
  // Parks the ticket's position until its whole group is in `slot` or the run fails.
  void WaitForGroup(std::unique_lock<SpinMutex>& lock, Slot& slot, const Ticket& ticket);
  // Wakes the positions parked on `slot` whose groups are complete.
  void WakeCompleteGroups(const Slot& slot);
  // Counts one reader of the ticket's group out of its slot: the last local reader drops the
  // group's arrivals (and operands), and a slot with none left goes back to the free list.
  void FinishReading(const Ticket& ticket);

  // OK if every member of the ticket's group that is in `slot` agrees with the ticket's arrival;
  // else the FailedPrecondition naming both devices and ops.
  absl::Status CheckArrived(const Slot& slot, const Ticket& ticket) const;
  // Whether `theirs` (of `member`) is the same collective as `mine` with `group`.
  static bool Agree(const Arrival& mine, const Arrival& theirs, int64_t member,
                    const CollectiveGroup& group);
  // The FailedPrecondition for `position` and `other` disagreeing at collective `seq`.
  absl::Status Mismatch(int64_t seq, int64_t position, const Arrival& mine, int64_t other,
                        const Arrival& theirs) const;

 private:
  void AddFree(std::unique_ptr<Slot> slot);

  RunCore& core_;
  SlotCache* const cache_;
  std::vector<int64_t> next_seq_;               // per mesh position
  absl::flat_hash_map<int64_t, Slot*> slots_;  // live slots by sequence number
  std::vector<std::unique_ptr<Slot>> owned_;   // every slot this run made or borrowed
  std::vector<Slot*> free_;                    // of owned_, not live
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_RENDEZVOUS_H_
