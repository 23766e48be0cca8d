// psend and precv: point-to-point sends that meet at no rendezvous. A psend queues its operand
// (immutable: no copy) for each of its targets, in this process or posted to the target's; the
// k-th precv of a target from a source takes the k-th psend of that source to it, parking until it
// is there. Queues left at the end of a run fail it. State is guarded by RunCore::mu()
// (run_core.h).
#ifndef SHARDJIT_RUNTIME_MAILBOX_H_
#define SHARDJIT_RUNTIME_MAILBOX_H_

#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"
#include "runtime/collective_plan.h"
#include "runtime/run_core.h"
#include "runtime/stall.h"

namespace shardjit::runtime {

class Mailbox {
 public:
  // Pairs are resolved through `plan`.
  Mailbox(RunCore& core, const CollectivePlan& plan, StallDiagnosis& stall);

  // psend: queues `x` for each target of the pairs whose source is `position`; returns the
  // token. Takes mu.
  absl::StatusOr<std::vector<ir::Tensor>> Send(int64_t position, const ir::Op& op,
                                               const ir::Tensor& x);
  // precv: the next tensor queued for `position` from its pair's source (waiting for it), or
  // zeros where `position` is no target. Takes mu.
  absl::StatusOr<std::vector<ir::Tensor>> Receive(int64_t position, const ir::Op& op,
                                                  ir::Allocator* allocator);
  // A psend from remote `source` to local `target`. Takes mu.
  void Deliver(int64_t source, int64_t target, ir::Tensor x);
  // After the run: FailedPrecondition naming the first psend no precv received, else OK. Takes
  // mu.
  absl::Status CheckAllReceived() const;

 private:
  RunCore& core_;
  const CollectivePlan& plan_;
  StallDiagnosis& stall_;
  // psends not yet received, in order, by (source, target) position; node-based, so a parked
  // receiver's queue stays put. Under mu.
  std::map<std::pair<int64_t, int64_t>, std::deque<ir::Tensor>> mail_;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_MAILBOX_H_
