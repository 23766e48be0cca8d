// Jobs of several processes (like jax.distributed): each process initialises, then gives the
// group to its Runtime, whose meshes then span every process's devices.
//
//   ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> group,
//                    distributed::initialize());  // from SHARDJIT_* vars
//   Runtime rt({.num_devices = 2, .processes = group});  // 2 devices per process
//   ASSIGN_OR_RETURN(Mesh mesh,
//                    make_mesh(rt, {{"x", group ? group->num_processes() : 1}, {"y", 2}}));
//
// The same jit/shard_map programs then run unchanged; device_put keeps the blocks of this
// process's devices, and process_allgather (frontend/array.h) gathers a whole array.
#ifndef SHARDJIT_FRONTEND_DISTRIBUTED_H_
#define SHARDJIT_FRONTEND_DISTRIBUTED_H_

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "runtime/distributed/distributed.h"
#include "runtime/remote.h"

namespace shardjit {

using DistributedOptions = runtime::DistributedOptions;
using ProcessGroup = runtime::ProcessGroup;

namespace distributed {

// Connects this process to the others of its job, from `options` or, without them, from the
// environment (SHARDJIT_NUM_PROCESSES, SHARDJIT_PROCESS_ID, SHARDJIT_COORDINATOR, ...). Null when
// neither names a job: the process runs alone.
inline absl::StatusOr<std::shared_ptr<ProcessGroup>> initialize(
    std::optional<DistributedOptions> options = std::nullopt) {
  if (!options) {
    absl::StatusOr<std::optional<DistributedOptions>> env = DistributedOptions::FromEnv();
    if (!env.ok()) return env.status();
    if (!env->has_value()) return std::shared_ptr<ProcessGroup>();
    options = **env;
  }
  return runtime::InitializeDistributed(*options);
}

}  // namespace distributed
}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_DISTRIBUTED_H_
