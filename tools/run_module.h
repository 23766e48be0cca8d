// Runs a module file's entry on an in-process runtime of virtual devices, with whole (global)
// arrays in and out, lowered and compiled as jit would. A per-device module (view=per_device,
// also what a partitioned global-view module becomes) gets each input split into blocks by its
// param sharding and runs its entry on every mesh position (Runtime::RunSpmd); its outputs are
// assembled from the blocks by the result shardings. A global-view module the partitioner leaves
// whole runs on the host with whole arrays (Runtime::RunGlobal), its shard_map ops fanning out to
// the devices.
#ifndef SHARDJIT_TOOLS_RUN_MODULE_H_
#define SHARDJIT_TOOLS_RUN_MODULE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/lowering.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"
#include "ir/types.h"
#include "runtime/run_options.h"

namespace shardjit::tools {

// The global types of a module's entry parameters and results (for a per-device module, the
// local types scaled up by the param/result shardings). InvalidArgument if the module does not
// verify.
struct GlobalSignature {
  std::vector<ir::ShapedType> params;
  std::vector<ir::ShapedType> results;
};

absl::StatusOr<GlobalSignature> ModuleGlobalSignature(const ir::Module& module);

// Verifies `module`, lowers it as jit does (frontend/lowering.h: the same passes and machine
// model) and runs it with `backend`'s kernels on `inputs` (global arrays, one per entry
// parameter) with a runtime of `num_devices` devices (<= 0: as many as the mesh's device ids
// need). Errors about an input name it by index and, when given, by `input_names[i]`, with the
// expected and actual types. `options`: a deadline (DeadlineExceeded) and a cancellation token.
absl::StatusOr<std::vector<ir::Tensor>> RunModule(const ir::Module& module,
                                                  const std::vector<ir::Tensor>& inputs,
                                                  int num_devices = 0,
                                                  const std::vector<std::string>& input_names = {},
                                                  const runtime::RunOptions& options = {},
                                                  Backend backend = DefaultBackend());

}  // namespace shardjit::tools

#endif  // SHARDJIT_TOOLS_RUN_MODULE_H_
