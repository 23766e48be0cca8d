// The in-process collective fabric. Devices of one run meet at a rendezvous per collective: the
// k-th collective a device executes meets the k-th of every member of its group. Operands are
// read from the peers' buffers directly. Devices that disagree on the op, its operand types or
// the group fail the run with an error naming them; a member that never arrives fails the run
// once the run has made no progress (no arrival, no device taking a core) for the timeout. Any
// failure cancels the run, waking every waiting device. A device that has to wait gives its core
// back (CoreSemaphore) for as long as it waits.
#ifndef SHARDJIT_RUNTIME_FABRIC_H_
#define SHARDJIT_RUNTIME_FABRIC_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/executable.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"
#include "runtime/core_semaphore.h"

namespace shardjit::runtime {

// Shared state of one SPMD run over a mesh.
class RunState {
 public:
  // Devices of the run hold a core of `cores` (if not null) while they compute.
  RunState(ir::Mesh mesh, absl::Duration timeout, CoreSemaphore* cores = nullptr);

  const ir::Mesh& mesh() const { return mesh_; }

  // Executes collective `op` for mesh position `position`. axis_index and axis_size are
  // answered locally; the others rendezvous with the group. With a `recorder`, the wait at the
  // rendezvous (arrival until the group is complete) and the data step are recorded as spans.
  absl::StatusOr<std::vector<ir::Tensor>> Collective(int64_t position, const ir::Op& op,
                                                     const std::vector<ir::Tensor>& operands,
                                                     ir::Allocator* allocator,
                                                     backends::SpanRecorder* recorder = nullptr);

  // The core of `position`: taken before its program runs and again after each wait at a
  // collective, given back during the wait and when the program ends. TakeCore returns false
  // (holding nothing) once the run is cancelled; both are no-ops without a CoreSemaphore.
  bool TakeCore(int64_t position);
  void GiveCore(int64_t position);

  // Fails the run with `status` (the first failure wins) and wakes every waiting device.
  void Cancel(const absl::Status& status);
  // OK while the run goes on; the failure otherwise.
  absl::Status status() const;

 private:
  struct Arrival {
    std::string signature;  // op, attributes and operand type: must agree within a group
    std::vector<int64_t> members;
    std::vector<ir::Tensor> operands;
    const ir::Op* op = nullptr;  // lives as long as the run; described only in errors
  };
  // All arrivals for the k-th collective of the run, by mesh position.
  struct Slot {
    std::map<int64_t, Arrival> arrivals;
    std::map<int64_t, int> readers_left;  // per group (keyed by first member)
  };

  absl::StatusOr<std::vector<ir::Tensor>> Rendezvous(int64_t position, const ir::Op& op,
                                                     const std::vector<ir::Tensor>& operands,
                                                     ir::Allocator* allocator,
                                                     backends::SpanRecorder* recorder);

  const ir::Mesh mesh_;
  const absl::Duration timeout_;
  CoreSemaphore* const cores_;
  std::vector<char> holds_core_;  // per position; touched only by that position's thread
  uint64_t arrivals_ = 0;         // under mu_: progress of the run, with cores_->grants()
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> cancelled_{false};
  absl::Status status_;
  std::vector<int64_t> next_seq_;  // per mesh position
  std::map<int64_t, Slot> slots_;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_FABRIC_H_
