#include "runtime/runtime.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "backends/executable.h"
#include "base/status_macros.h"
#include "base/thread_pool.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/ir.pb.h"
#include "ir/sharding.h"
#include "ir/types.h"
#include "runtime/collective_ops.h"
#include "runtime/collective_plan.h"
#include "runtime/device.h"
#include "runtime/fabric.h"
#include "runtime/remote.h"
#include "runtime/scheduler.h"
#include "runtime/shard_map_cache.h"
#include "runtime/shards.h"

namespace shardjit::runtime {
namespace {

uint64_t NextRuntimeId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

// $SHARDJIT_NUM_THREADS if it is a positive number, else the cores this process may run on.
int DefaultThreads() {
  if (const char* env = std::getenv("SHARDJIT_NUM_THREADS"); env != nullptr) {
    const int threads = std::atoi(env);
    if (threads > 0) return threads;
  }
  return base::AvailableCores();
}

// The first reason `options` gives to stop now: the token cancelled, or the deadline passed.
absl::Status StopReason(const RunOptions& options) {
  if (options.cancel != nullptr && options.cancel->cancelled()) {
    return absl::CancelledError("run cancelled");
  }
  if (options.deadline != absl::InfiniteFuture() && absl::Now() >= options.deadline) {
    return absl::DeadlineExceededError("run did not finish before its deadline");
  }
  return absl::OkStatus();
}

}  // namespace

struct Runtime::Internal {
  std::vector<std::unique_ptr<Scheduler::Task>> tasks;  // per device
  RunState::SlotCache slot_cache;  // collective slots, reused run after run
};

int Runtime::process_id() const { return processes_ ? processes_->process_id() : 0; }
int Runtime::num_processes() const { return processes_ ? processes_->num_processes() : 1; }
Device& Runtime::device(int id) { return *devices_[id]; }
MemoryStats Runtime::memory(int id) const { return devices_[id]->memory(); }

// The context of one device in an SPMD run.
class Runtime::SpmdContext final : public backends::DeviceContext {
 public:
  SpmdContext(RunState& run, int64_t position, Device& device, base::SpanRecorder* recorder,
              const RunOptions& options)
      : run_(run), position_(position), device_(device), recorder_(recorder), options_(options) {}
  ir::Allocator* allocator() override { return device_.allocator(); }
  absl::StatusOr<std::vector<ir::Tensor>> RunCollective(
      const ir::Op& op, const std::vector<ir::Tensor>& operands) override {
    return run_.Collective(position_, op, operands, device_.allocator(), recorder_);
  }
  base::SpanRecorder* profiler() override { return recorder_; }
  backends::KernelPeers* kernel_peers() override { return run_.KernelPeersOf(position_); }
  absl::StatusOr<std::vector<ir::Tensor>> RunShardMap(const ir::Op& op,
                                                      const std::vector<ir::Tensor>&) override {
    return absl::InvalidArgumentError(
        fmt::format("{}: shard_map cannot run inside a per-device program", op.opcode()));
  }
  absl::Status Cancelled() override {
    if (absl::Status s = StopReason(options_); !s.ok()) run_.Cancel(s);
    return run_.status();
  }

 private:
  RunState& run_;
  int64_t position_;
  Device& device_;
  base::SpanRecorder* recorder_;
  const RunOptions& options_;
};

// The context of a global-view program running on the caller's thread.
class Runtime::GlobalContext final : public backends::DeviceContext {
 public:
  GlobalContext(Runtime& rt, const ir::Mesh& mesh, const CompileFn& compile, ShardMapCache& cache,
                const RunOptions& options)
      : rt_(rt), mesh_(mesh), compile_(compile), cache_(cache), options_(options) {}
  ir::Allocator* allocator() override { return ir::HostAllocator(); }
  absl::StatusOr<std::vector<ir::Tensor>> RunCollective(
      const ir::Op& op, const std::vector<ir::Tensor>&) override {
    return absl::InvalidArgumentError(
        fmt::format("{}: collectives need a mapped axis (use shard_map)", op.opcode()));
  }
  absl::Status Cancelled() override { return StopReason(options_); }
  base::SpanRecorder* profiler() override {
    return rt_.profiler() != nullptr ? rt_.profiler()->ForDevice(Profiler::kHost) : nullptr;
  }

  absl::StatusOr<std::vector<ir::Tensor>> RunShardMap(
      const ir::Op& op, const std::vector<ir::Tensor>& operands) override {
    const ir::ShardMapAttrs& sm = op.shard_map();
    ASSIGN_OR_RETURN(const ShardMapCache::Entry* body, Body(op));
    int64_t n = ir::MeshSize(mesh_);
    std::vector<std::vector<ir::Tensor>> args(n);
    for (int64_t p = 0; p < n; ++p) {
      const int64_t id = mesh_.device_ids_size() ? mesh_.device_ids(p) : p;
      if (id < 0 || id >= rt_.num_devices()) {
        return absl::InvalidArgumentError(
            fmt::format("shard_map: mesh position {} names device {}, but the runtime has {}", p,
                        id, rt_.num_devices()));
      }
      if (!rt_.is_local(id)) {
        return absl::UnimplementedError(fmt::format(
            "shard_map of a program run unpartitioned needs every device of its mesh in this "
            "process; device {} is in process {}",
            id, rt_.ProcessOfDevice(id)));
      }
      Device& device = rt_.device(static_cast<int>(id));
      for (size_t i = 0; i < operands.size(); ++i) {
        ASSIGN_OR_RETURN(
            ir::Tensor shard,
            ShardOf(operands[i], mesh_, sm.in_specs(i), p, device.allocator(), "shard_map"));
        args[p].push_back(std::move(shard));
      }
    }
    std::vector<const backends::Executable*> programs(n, body->body.get());
    ASSIGN_OR_RETURN(std::vector<std::vector<ir::Tensor>> locals,
                     rt_.RunSpmd(mesh_, programs, std::move(args), body->plan.get(), options_));
    // Assemble each global result from the blocks (for replicated axes, the lowest position).
    std::vector<ir::Tensor> results;
    for (int r = 0; r < op.results_size(); ++r) {
      std::vector<ir::Tensor> shards;
      for (int64_t p = 0; p < n; ++p) shards.push_back(std::move(locals[p][r]));
      ASSIGN_OR_RETURN(Assembled global,
                       AssembleFrom(shards, mesh_, sm.out_specs(r),
                                    ir::FromProto(op.result_types(r)), "shard_map"));
      results.push_back(std::move(global.global));
    }
    return results;
  }

 private:
  absl::StatusOr<const ShardMapCache::Entry*> Body(const ir::Op& op) {
    std::lock_guard<std::mutex> lock(cache_.mu);
    for (const ShardMapCache::Entry& entry : cache_.entries) {
      if (entry.op == &op) return &entry;
    }
    ir::Function body;
    body.set_name("shard_map_body");
    *body.mutable_body() = op.shard_map().body();
    ASSIGN_OR_RETURN(std::unique_ptr<backends::Executable> exe, compile_(body));
    auto plan = std::make_unique<CollectivePlan>(
        mesh_, std::vector<const ir::Function*>{exe->function()});
    cache_.entries.push_back({&op, std::move(exe), std::move(plan)});
    return &cache_.entries.back();
  }

  Runtime& rt_;
  const ir::Mesh& mesh_;
  const CompileFn& compile_;
  ShardMapCache& cache_;
  const RunOptions& options_;
};

namespace {

// What the devices of one run share: the transport and where their results go.
struct RunBook {
  RunState& run;
  Scheduler& scheduler;
  const RunOptions& options;
  std::vector<absl::StatusOr<std::vector<ir::Tensor>>> results;
  std::atomic<int64_t> remaining{0};  // devices not finished
};

}  // namespace

// One device's part of a run: its program, run as the device's scheduler task.
struct Runtime::DeviceRun {
  RunBook* book = nullptr;
  int64_t position = 0;
  Device* device = nullptr;
  const backends::Executable* program = nullptr;
  std::vector<ir::Tensor>* args = nullptr;
  base::Parallelism parallelism;
  base::SpanRecorder* recorder = nullptr;

  static void Body(void* arg) { static_cast<DeviceRun*>(arg)->Run(); }
  // Runs on the device's thread once its task is off its stack: the run may end now.
  static void Exited(void* arg) {
    RunBook& book = *static_cast<DeviceRun*>(arg)->book;
    Scheduler& scheduler = book.scheduler;  // `book` may be gone once remaining is 0
    if (book.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) scheduler.Interrupt(0);
  }

  void Run() {
    RunState& run = book->run;
    base::CurrentParallelism() = parallelism;
    SpmdContext ctx(run, position, *device, recorder, book->options);
    // A device whose run failed before it started does not start.
    absl::Status status = run.status();
    absl::StatusOr<std::vector<ir::Tensor>> r =
        status.ok() ? program->Run(*args, ctx) : absl::StatusOr<std::vector<ir::Tensor>>(status);
    for (size_t i = 0; r.ok() && i < r->size(); ++i) {
      if ((*r)[i].future() != nullptr) {  // it would outlive the run it belongs to
        r = absl::InvalidArgumentError(fmt::format(
            "result {} is a future ({}); await it first", i, (*r)[i].type().ToString()));
      }
    }
    if (!r.ok()) {
      run.Cancel(absl::Status(r.status().code(),
                              fmt::format("device {}: {}", device->id(), r.status().message())));
    }
    args->clear();
    book->results[position] = std::move(r);
  }
};

// Watches the run in flight from a thread of its own (so that a device computing without end on
// the calling thread cannot hide anything from it): fails the run once it has made no progress (an
// arrival at a collective, a device resumed or finished) for the collective timeout, naming a
// device that waits for peers that never came, and once its deadline passes (devices waiting at a
// collective check no deadline themselves). Samples four times per timeout, so a stall is caught
// within 1.25 timeouts.
class Runtime::Watchdog {
 public:
  Watchdog(absl::Duration timeout, const Scheduler& scheduler)
      : timeout_(timeout), scheduler_(scheduler), thread_([this] { Loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  // Watches `run` (null: none) until `deadline` from now on. The thread is woken only to take
  // a deadline into account: its periodic samples find the run anyway, and a wake per run costs
  // a context switch where cores are scarce.
  void Watch(RunState* run, absl::Time deadline = absl::InfiniteFuture()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      run_ = run;
      deadline_ = deadline;
      stalled_samples_ = -1;
    }
    if (deadline != absl::InfiniteFuture()) cv_.notify_one();
  }

 private:
  static constexpr int kSamplesPerTimeout = 4;
  void Loop() {
    const absl::Duration period = timeout_ / kSamplesPerTimeout;
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      const absl::Time now = absl::Now();
      absl::Time wake = now + period;
      if (run_ != nullptr && deadline_ < wake) wake = deadline_;
      if (wake != absl::InfiniteFuture()) {
        cv_.wait_for(lock, absl::ToChronoNanoseconds(std::max(wake - now, absl::ZeroDuration())));
      } else {
        cv_.wait(lock);
      }
      if (stop_ || run_ == nullptr) continue;
      if (absl::Now() >= deadline_) {
        run_->Cancel(absl::DeadlineExceededError("run did not finish before its deadline"));
        deadline_ = absl::InfiniteFuture();  // once: devices still in a kernel stop after it
        continue;
      }
      if (timeout_ == absl::InfiniteDuration()) continue;
      const uint64_t progress = run_->arrivals() + scheduler_.progress();
      if (stalled_samples_ < 0 || progress != seen_) {
        stalled_samples_ = 0;
        seen_ = progress;
      } else if (++stalled_samples_ >= kSamplesPerTimeout) {
        run_->FailStalled(timeout_);
        stalled_samples_ = 0;
      }
    }
  }

  const absl::Duration timeout_;
  const Scheduler& scheduler_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  RunState* run_ = nullptr;
  absl::Time deadline_ = absl::InfiniteFuture();
  uint64_t seen_ = 0;
  int stalled_samples_ = -1;  // samples in a row without progress; -1: none taken yet
  std::thread thread_;        // last: starts once the rest is set
};

Runtime::Runtime(RuntimeOptions options)
    : options_(options),
      id_(NextRuntimeId()),
      ref_(new RuntimeRef(this)),
      processes_(options_.processes),
      internal_(std::make_unique<Internal>()) {
  local_devices_ = std::max(1, options_.num_devices);
  const int n = local_devices_ * (processes_ ? processes_->num_processes() : 1);
  for (int i = 0; i < n; ++i) {
    devices_.push_back(std::make_unique<Device>(i));
    internal_->tasks.push_back(std::make_unique<Scheduler::Task>());
  }
  num_threads_ = options_.num_threads > 0 ? options_.num_threads : DefaultThreads();
  pool_ = std::make_unique<base::ThreadPool>(num_threads_ - 1);
  // The processes of a job may share this host's cores: an idle thread that polls would take a
  // core from another process's transfer (see RuntimeOptions::processes).
  scheduler_ = std::make_unique<Scheduler>(
      num_threads_,
      num_processes() > 1 ? std::chrono::microseconds(0) : Scheduler::kDefaultIdleSpin);
  watchdog_ = std::make_unique<Watchdog>(
      options_.collective_timeout == absl::InfiniteDuration()
          ? absl::InfiniteDuration()
          : std::clamp(options_.collective_timeout, absl::Milliseconds(1), absl::Hours(24 * 365)),
      *scheduler_);
  if (const char* path = std::getenv("SHARDJIT_PROFILE"); path != nullptr && *path != '\0') {
    profile_path_ = ProcessTracePath(path, process_id(), num_processes());
  }
  if (options_.profile || !profile_path_.empty()) profiler_ = std::make_unique<Profiler>(n);
}

Runtime::~Runtime() {
  ref_->runtime_.store(nullptr, std::memory_order_release);
  scheduler_.reset();  // no run is in flight: every task has finished
  if (profiler_ != nullptr && !profile_path_.empty()) {
    if (absl::Status s = profiler_->WriteChromeTrace(profile_path_); !s.ok()) {
      std::fprintf(stderr, "shardjit: %s\n", std::string(s.message()).c_str());
    }
  }
}

absl::StatusOr<std::vector<std::vector<ir::Tensor>>> Runtime::RunSpmd(
    const ir::Mesh& mesh, const std::vector<const backends::Executable*>& programs,
    std::vector<std::vector<ir::Tensor>> args, const CollectivePlan* plan,
    const RunOptions& options) {
  const int64_t n = ir::MeshSize(mesh);
  if (static_cast<int64_t>(programs.size()) != n || static_cast<int64_t>(args.size()) != n) {
    return absl::InvalidArgumentError(fmt::format(
        "RunSpmd: mesh {} has {} positions but got {} programs and {} argument lists",
        ir::MeshToString(mesh), n, programs.size(), args.size()));
  }
  std::vector<bool> named(num_devices(), false);
  for (int64_t p = 0; p < n; ++p) {
    int64_t id = mesh.device_ids_size() ? mesh.device_ids(p) : p;
    if (id < 0 || id >= num_devices()) {
      return absl::InvalidArgumentError(fmt::format(
          "RunSpmd: mesh position {} names device {}, but the runtime has {} devices", p, id,
          num_devices()));
    }
    if (named[id]) {
      return absl::InvalidArgumentError(fmt::format(
          "RunSpmd: mesh {} names device {} at more than one position (position {})",
          ir::MeshToString(mesh), id, p));
    }
    named[id] = true;
  }
  std::vector<int> process_of(n);
  int64_t local = 0;
  for (int64_t p = 0; p < n; ++p) {
    const int64_t id = mesh.device_ids_size() ? mesh.device_ids(p) : p;
    process_of[p] = static_cast<int>(ProcessOfDevice(id));
    if (process_of[p] == process_id()) ++local;
  }
  if (local == 0) return std::vector<std::vector<ir::Tensor>>(n);  // nothing runs here
  for (int64_t p = 0; p < n; ++p) {
    if (process_of[p] == process_id() && programs[p] == nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("RunSpmd: no program for mesh position {}", p));
    }
  }
  std::optional<CollectivePlan> own_plan;
  if (plan == nullptr) {
    std::vector<const ir::Function*> functions;
    for (const backends::Executable* program : programs) {
      if (program != nullptr) functions.push_back(program->function());
    }
    plan = &own_plan.emplace(mesh, functions);
  }
  // Collectives reduce on the kernels of the backend the programs were compiled by.
  const backends::Executable* first_program = nullptr;
  for (const backends::Executable* program : programs) {
    if (first_program == nullptr) first_program = program;
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  RunState run(*plan, first_program->backend(), &internal_->slot_cache);
  // Positions of other processes: the run meets them through the process group.
  std::unique_ptr<RemotePeers> peers;
  if (local < n) peers = processes_->BeginRun(mesh, process_of, run);
  RunBook book{run, *scheduler_, options,
               std::vector<absl::StatusOr<std::vector<ir::Tensor>>>(
                   n, absl::UnknownError("not run"))};
  // A cancelled token stops the run at once, devices waiting at collectives included.
  const int64_t subscription =
      options.cancel == nullptr
          ? -1
          : options.cancel->Subscribe([&run] { run.Cancel(absl::CancelledError("run cancelled")); });
  book.remaining = local;
  const base::Parallelism per_device{
      pool_.get(), static_cast<int>(std::max<int64_t>(1, num_threads_ / local)),
      base::StopSignal{run.stopped_flag(), options.deadline}};
  std::vector<DeviceRun> devices(n);
  int64_t started = 0;
  for (int64_t p = 0; p < n; ++p) {
    if (process_of[p] != process_id()) continue;
    const int64_t id = mesh.device_ids_size() ? mesh.device_ids(p) : p;
    devices[p] = DeviceRun{&book,         p,        devices_[id].get(), programs[p], &args[p],
                           per_device,    profiler_ != nullptr ? profiler_->ForDevice(id) : nullptr};
    scheduler_->Start(*internal_->tasks[id], static_cast<int>(started++ % num_threads_), &DeviceRun::Body,
                      &DeviceRun::Exited, &devices[p]);
  }
  // This thread runs thread 0's devices until every device has finished.
  watchdog_->Watch(&run, options.deadline);
  scheduler_->Drive([&] { return book.remaining.load(std::memory_order_acquire) == 0; });
  watchdog_->Watch(nullptr);
  if (subscription >= 0) options.cancel->Unsubscribe(subscription);
  // What this process posted to the others leaves before the run ends (and the process may exit).
  absl::Status flushed = peers != nullptr ? processes_->Flush() : absl::OkStatus();
  peers.reset();
  RETURN_IF_ERROR(run.status());
  RETURN_IF_ERROR(run.CheckAllReceived());
  RETURN_IF_ERROR(flushed);
  std::vector<std::vector<ir::Tensor>> out(n);
  for (int64_t p = 0; p < n; ++p) {
    if (process_of[p] == process_id()) out[p] = std::move(*book.results[p]);
  }
  return out;
}

absl::StatusOr<std::vector<ir::Tensor>> Runtime::RunGlobal(const ir::Mesh& mesh,
                                                           const backends::Executable& program,
                                                           const std::vector<ir::Tensor>& args,
                                                           const CompileFn& compile,
                                                           ShardMapCache& cache,
                                                           const RunOptions& options) {
  GlobalContext ctx(*this, mesh, compile, cache, options);
  base::ScopedParallelism parallelism(
      {pool_.get(), num_threads_,
       base::StopSignal{options.cancel ? options.cancel->flag() : nullptr, options.deadline}});
  return program.Run(args, ctx);
}

}  // namespace shardjit::runtime
