// How the devices of one run exchange data: the interface a device's program reaches collectives
// through. The in-process fabric (runtime/fabric.h, devices in this process reading each other's
// buffers) implements it; a transport between processes is a second implementation under it.
// Devices run as runtime/scheduler.h tasks: a transport waits by parking the calling task
// (Scheduler::Park), never by blocking its thread.
#ifndef SHARDJIT_RUNTIME_TRANSPORT_H_
#define SHARDJIT_RUNTIME_TRANSPORT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/executable.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::runtime {

class Transport {
 public:
  virtual ~Transport() = default;

  // Executes collective `op` for mesh position `position`: a blocking collective returns its
  // result; `X_start` returns a future at once that `X_done` (given that future) awaits
  // (ir/async.h); axis_index / axis_size are answered locally. Spans go to `recorder`.
  virtual absl::StatusOr<std::vector<ir::Tensor>> Collective(
      int64_t position, const ir::Op& op, const std::vector<ir::Tensor>& operands,
      ir::Allocator* allocator, base::SpanRecorder* recorder) = 0;

  // Fails the run with `status` (the first failure wins), waking every waiting device.
  virtual void Cancel(const absl::Status& status) = 0;
  // OK while the run goes on; the failure otherwise.
  virtual absl::Status status() const = 0;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_TRANSPORT_H_
