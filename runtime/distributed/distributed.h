// Distributed initialisation, modelled on jax.distributed.initialize: a process learns its id, the
// number of processes and how to meet the others from options or the environment, meets them
// through a store (a TCP store served by process 0, or a file store in a directory they share)
// and connects to every other process with Gloo. The ProcessGroup it returns goes into
// RuntimeOptions::processes; a Runtime then owns `num_devices` devices of each process, and
// meshes over global device ids span processes.
#ifndef SHARDJIT_RUNTIME_DISTRIBUTED_DISTRIBUTED_H_
#define SHARDJIT_RUNTIME_DISTRIBUTED_DISTRIBUTED_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/remote.h"

namespace shardjit::runtime {

struct DistributedOptions {
  int num_processes = 1;
  int process_id = 0;
  // "host:port" where process 0 serves the TCP store the processes meet through...
  std::string coordinator;
  // ...or a directory every process sees (a file store; use a fresh one per job).
  std::string store_dir;
  // The address this process accepts its peers on (default: 127.0.0.1 when the coordinator is
  // on loopback, else this host's name).
  std::string hostname;
  // How long processes wait for each other: to join, to exchange blocks, to take sends.
  absl::Duration timeout = absl::Seconds(60);

  // From SHARDJIT_NUM_PROCESSES, SHARDJIT_PROCESS_ID, SHARDJIT_COORDINATOR (or
  // SHARDJIT_STORE_DIR), SHARDJIT_HOSTNAME and SHARDJIT_DISTRIBUTED_TIMEOUT (seconds); nullopt when
  // SHARDJIT_NUM_PROCESSES is not set. Malformed values are errors naming the variable.
  static absl::StatusOr<std::optional<DistributedOptions>> FromEnv();
};

// Connects this process to the others of the job (every process calls it). Fails, naming what is
// missing, when the coordinator cannot be reached or served, or processes do not join within the
// timeout. With one process it connects nothing and returns a group of one.
absl::StatusOr<std::shared_ptr<ProcessGroup>> InitializeDistributed(
    const DistributedOptions& options);

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_DISTRIBUTED_DISTRIBUTED_H_
