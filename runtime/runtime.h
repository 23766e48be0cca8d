// The runtime: N virtual devices (independent of the number of cores), run as tasks on one thread
// per core (runtime/scheduler.h), and the entry points that run compiled programs on them: one
// program per mesh position run concurrently (SPMD or MPMD), or a global-view program whose
// shard_map ops fan out to devices. This header is light (no protobuf, fabric or scheduler
// headers): the public API includes it. runtime/shard_map_cache.h defines what RunGlobal caches.
#ifndef SHARDJIT_RUNTIME_RUNTIME_H_
#define SHARDJIT_RUNTIME_RUNTIME_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ir/tensor.h"
#include "runtime/memory_stats.h"
#include "runtime/profiler.h"
#include "runtime/run_options.h"

namespace shardjit {
namespace backends {
class Executable;
}  // namespace backends
namespace base {
class ThreadPool;
}  // namespace base
namespace ir {
class Function;
class Mesh;
}  // namespace ir
}  // namespace shardjit

namespace shardjit::runtime {

class CollectivePlan;
class Device;
class ProcessGroup;
class Scheduler;

struct RuntimeOptions {
  // Number of virtual devices (like jax_num_cpu_devices); 1 to 64 run on any core count.
  int num_devices = 1;
  // How long a device waits at a collective for the rest of its group, with the run making no
  // progress meanwhile (no arrival at a collective, no device resumed), before the run fails.
  absl::Duration collective_timeout = absl::Seconds(60);
  // Threads the devices run on and kernels may use, in all (0: $SHARDJIT_NUM_THREADS if set, else
  // the cores this process may run on). Mesh position p of a run runs on thread p % num_threads;
  // devices sharing a thread take turns, switching at collectives. Each device's kernels may use
  // max(1, num_threads / devices in the run) threads, its own included, so a GEMM on a device
  // that has cores to spare splits over the runtime's helper threads.
  int num_threads = 0;
  // Records per-device spans (runtime/profiler.h). Also on when $SHARDJIT_PROFILE names a file,
  // which then receives the Chrome trace when the runtime is destroyed.
  bool profile = false;
  // The processes of a distributed job (runtime/distributed/distributed.h), or null: this process
  // alone. With them, `num_devices` devices belong to each process, process k owning global
  // device ids [k * num_devices, (k + 1) * num_devices); runs execute the mesh positions of this
  // process's devices, and collectives reach the others' through the group. The device threads
  // of a runtime with several processes sleep as soon as they are idle instead of polling for a
  // while: the processes may share the host's cores.
  std::shared_ptr<ProcessGroup> processes;
};

// Compiles a per-device function; the backend in use.
using CompileFn =
    std::function<absl::StatusOr<std::unique_ptr<backends::Executable>>(const ir::Function&)>;

class Runtime;

// Refers to a runtime until it is destroyed, then to none: what may outlive a runtime (a mesh)
// holds one instead of a reference, so a use after destruction is an error, not a dangling read.
class RuntimeRef {
 public:
  // The runtime, or null once it has been destroyed.
  Runtime* get() const { return runtime_.load(std::memory_order_acquire); }

 private:
  friend class Runtime;
  explicit RuntimeRef(Runtime* runtime) : runtime_(runtime) {}
  std::atomic<Runtime*> runtime_;
};

class Runtime {
 public:
  explicit Runtime(RuntimeOptions options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Devices of the whole job (of every process); ids are global.
  int num_devices() const { return static_cast<int>(devices_.size()); }
  // Devices of this process, and whether device `id` is one of them.
  int num_local_devices() const { return local_devices_; }
  bool is_local(int64_t id) const { return ProcessOfDevice(id) == process_id(); }
  int64_t ProcessOfDevice(int64_t id) const { return id / local_devices_; }
  int process_id() const;
  int num_processes() const;
  // The job's processes, or null for a runtime of one process.
  ProcessGroup* processes() const { return processes_.get(); }
  // Unique in the process (never reused, unlike an address).
  uint64_t id() const { return id_; }
  // Refers to this runtime until it is destroyed.
  std::shared_ptr<const RuntimeRef> ref() const { return ref_; }
  const RuntimeOptions& options() const { return options_; }
  // Threads that run devices and their kernels (options or $SHARDJIT_NUM_THREADS or the cores).
  int num_threads() const { return num_threads_; }
  Device& device(int id);
  MemoryStats memory(int id) const;
  // The profiler, or null when profiling is off.
  Profiler* profiler() { return profiler_.get(); }

  // Runs programs[p] on the device at mesh position p with args[p], all concurrently, and
  // returns each position's results. Positions whose devices belong to other processes are run
  // there (their programs may be null, their arguments empty, their results are empty here). On
  // failure, the first error (with the device named).
  // `plan`, built for `mesh` from the programs' functions, resolves their collectives (a compiled
  // program keeps one across runs); without it the run resolves them itself. `options`: a
  // deadline (DeadlineExceeded) and a cancellation token (Cancelled); either way every device
  // stops and the runtime is ready for the next run.
  absl::StatusOr<std::vector<std::vector<ir::Tensor>>> RunSpmd(
      const ir::Mesh& mesh, const std::vector<const backends::Executable*>& programs,
      std::vector<std::vector<ir::Tensor>> args, const CollectivePlan* plan = nullptr,
      const RunOptions& options = {});

  // Runs a global-view program on the calling thread with whole arrays; its shard_map ops are
  // compiled with `compile` (cached per op in `cache`) and run on the mesh's devices.
  struct ShardMapCache;
  absl::StatusOr<std::vector<ir::Tensor>> RunGlobal(const ir::Mesh& mesh,
                                                    const backends::Executable& program,
                                                    const std::vector<ir::Tensor>& args,
                                                    const CompileFn& compile,
                                                    ShardMapCache& cache,
                                                    const RunOptions& options = {});

 private:
  class SpmdContext;
  class Watchdog;
  struct DeviceRun;
  class GlobalContext;

  RuntimeOptions options_;
  uint64_t id_;
  std::shared_ptr<RuntimeRef> ref_;
  std::shared_ptr<ProcessGroup> processes_;  // null: one process
  int local_devices_ = 1;                    // devices per process
  std::vector<std::unique_ptr<Device>> devices_;
  struct Internal;  // the scheduler's tasks and the fabric's slot cache; outlives scheduler_
  std::unique_ptr<Internal> internal_;
  int num_threads_;                            // resolved options_.num_threads
  std::unique_ptr<base::ThreadPool> pool_;  // num_threads_ - 1 helpers
  std::unique_ptr<Scheduler> scheduler_;        // num_threads_ threads the devices run on
  std::unique_ptr<Watchdog> watchdog_;          // fails stalled runs and runs past a deadline
  std::unique_ptr<Profiler> profiler_;
  std::string profile_path_;  // from $SHARDJIT_PROFILE
  // One SPMD run at a time: two runs sharing devices in different orders could deadlock.
  std::mutex run_mu_;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_RUNTIME_H_
