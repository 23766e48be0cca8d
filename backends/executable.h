// The interface between backends and the runtime: a compiled per-device program and the hooks
// it calls back into the runtime for (memory, collectives, shard_map).
#ifndef SHARDJIT_BACKENDS_EXECUTABLE_H_
#define SHARDJIT_BACKENDS_EXECUTABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "backends/kernel_peers.h"
#include "base/span.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends {

// What a running program needs from the device it runs on. Implemented by the runtime.
class DeviceContext {
 public:
  virtual ~DeviceContext() = default;
  // Memory for results and temporaries, accounted to this device.
  virtual ir::Allocator* allocator() = 0;
  // Runs collective `op` (psum, all_gather, axis_index, ...) for this device: meets the peers of
  // its group, then returns this device's results.
  virtual absl::StatusOr<std::vector<ir::Tensor>> RunCollective(
      const ir::Op& op, const std::vector<ir::Tensor>& operands) = 0;
  // Runs a shard_map op of a global-view program on whole (global) operands.
  virtual absl::StatusOr<std::vector<ir::Tensor>> RunShardMap(
      const ir::Op& op, const std::vector<ir::Tensor>& operands) = 0;
  // Non-OK once the run was abandoned (another device failed); checked between ops.
  virtual absl::Status Cancelled() = 0;
  // Where this device's spans go; null when the runtime does not profile.
  virtual base::SpanRecorder* profiler() { return nullptr; }
  // How kernels reach their instances on the other devices of the run; null when the device
  // runs alone (kernels then use a LocalKernelPeers).
  virtual KernelPeers* kernel_peers() { return nullptr; }
};

// A program compiled for one device.
class Executable {
 public:
  virtual ~Executable() = default;
  virtual absl::StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>& args,
                                                      DeviceContext& device) const = 0;
  // The backend that compiled it: the runtime reduces the program's collectives with its
  // kernels (Backend::ReduceBuffers).
  virtual const Backend& backend() const = 0;
  // The function it runs, whose ops are the ones handed to DeviceContext::RunCollective (so the
  // runtime can resolve them ahead of a run); null if the backend keeps none.
  virtual const ir::Function* function() const { return nullptr; }
};

}  // namespace shardjit::backends

#endif  // SHARDJIT_BACKENDS_EXECUTABLE_H_
