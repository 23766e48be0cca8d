#include "runtime/runtime.h"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <optional>
#include <set>
#include <thread>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/sharding.h"
#include "ir/types.h"
#include "runtime/collective_ops.h"
#include "runtime/fabric.h"

namespace shardjit::runtime {
namespace {

uint64_t NextRuntimeId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

}  // namespace

// A thread that runs one device's tasks in order.
class Runtime::Worker {
 public:
  Worker() : thread_([this] { Loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void Post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread thread_;
};

// The context of one device in an SPMD run.
class Runtime::SpmdContext final : public backends::DeviceContext {
 public:
  SpmdContext(Transport& run, int64_t position, Device& device,
              backends::SpanRecorder* recorder)
      : run_(run), position_(position), device_(device), recorder_(recorder) {}
  ir::Allocator* allocator() override { return device_.allocator(); }
  absl::StatusOr<std::vector<ir::Tensor>> RunCollective(
      const ir::Op& op, const std::vector<ir::Tensor>& operands) override {
    return run_.Collective(position_, op, operands, device_.allocator(), recorder_);
  }
  backends::SpanRecorder* profiler() override { return recorder_; }
  absl::StatusOr<std::vector<ir::Tensor>> RunShardMap(const ir::Op& op,
                                                      const std::vector<ir::Tensor>&) override {
    return absl::InvalidArgumentError(
        fmt::format("{}: shard_map cannot run inside a per-device program", op.opcode()));
  }
  absl::Status Cancelled() override { return run_.status(); }

 private:
  Transport& run_;
  int64_t position_;
  Device& device_;
  backends::SpanRecorder* recorder_;
};

// The context of a global-view program running on the caller's thread.
class Runtime::GlobalContext final : public backends::DeviceContext {
 public:
  GlobalContext(Runtime& rt, const ir::Mesh& mesh, const CompileFn& compile, ShardMapCache& cache)
      : rt_(rt), mesh_(mesh), compile_(compile), cache_(cache) {}
  ir::Allocator* allocator() override { return ir::HostAllocator(); }
  absl::StatusOr<std::vector<ir::Tensor>> RunCollective(
      const ir::Op& op, const std::vector<ir::Tensor>&) override {
    return absl::InvalidArgumentError(
        fmt::format("{}: collectives need a mapped axis (use shard_map)", op.opcode()));
  }
  absl::Status Cancelled() override { return absl::OkStatus(); }
  backends::SpanRecorder* profiler() override {
    return rt_.profiler() != nullptr ? rt_.profiler()->ForDevice(Profiler::kHost) : nullptr;
  }

  absl::StatusOr<std::vector<ir::Tensor>> RunShardMap(
      const ir::Op& op, const std::vector<ir::Tensor>& operands) override {
    const ir::ShardMapAttrs& sm = op.shard_map();
    absl::StatusOr<const ShardMapCache::Entry*> body = Body(op);
    if (!body.ok()) return body.status();
    int64_t n = ir::MeshSize(mesh_);
    std::vector<std::vector<ir::Tensor>> args(n);
    for (int64_t p = 0; p < n; ++p) {
      std::vector<int64_t> coords = ir::MeshCoords(mesh_, p);
      const int64_t id = mesh_.device_ids_size() ? mesh_.device_ids(p) : p;
      if (id < 0 || id >= rt_.num_devices()) {
        return absl::InvalidArgumentError(
            fmt::format("shard_map: mesh position {} names device {}, but the runtime has {}", p,
                        id, rt_.num_devices()));
      }
      Device& device = rt_.device(static_cast<int>(id));
      for (size_t i = 0; i < operands.size(); ++i) {
        const ir::Tensor& global = operands[i];
        absl::StatusOr<std::vector<int64_t>> local =
            ir::LocalDims(mesh_, sm.in_specs(i), global.dims(), "shard_map");
        if (!local.ok()) return local.status();
        std::vector<int64_t> block = ir::BlockIndex(mesh_, sm.in_specs(i), global.type().rank(),
                                                    coords);
        std::vector<int64_t> offset(block.size());
        for (size_t d = 0; d < block.size(); ++d) offset[d] = block[d] * (*local)[d];
        ir::Tensor shard = ir::Tensor::Empty({global.dtype(), *local}, device.allocator());
        CopyBox(global, offset, shard, std::vector<int64_t>(offset.size(), 0), *local);
        args[p].push_back(std::move(shard));
      }
    }
    std::vector<const backends::Executable*> programs(n, (*body)->body.get());
    absl::StatusOr<std::vector<std::vector<ir::Tensor>>> locals =
        rt_.RunSpmd(mesh_, programs, std::move(args), (*body)->plan.get());
    if (!locals.ok()) return locals.status();
    // Assemble each global result from the blocks (for replicated axes, the lowest position).
    std::vector<ir::Tensor> results;
    for (int r = 0; r < op.results_size(); ++r) {
      ir::Tensor global = ir::Tensor::Empty(ir::FromProto(op.result_types(r)));
      std::set<std::vector<int64_t>> written;
      for (int64_t p = 0; p < n; ++p) {
        const ir::Tensor& local = (*locals)[p][r];
        std::vector<int64_t> block =
            ir::BlockIndex(mesh_, sm.out_specs(r), local.type().rank(), ir::MeshCoords(mesh_, p));
        if (!written.insert(block).second) continue;
        std::vector<int64_t> offset(block.size());
        for (size_t d = 0; d < block.size(); ++d) offset[d] = block[d] * local.dims()[d];
        CopyBox(local, std::vector<int64_t>(offset.size(), 0), global, offset, local.dims());
      }
      results.push_back(std::move(global));
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
    absl::StatusOr<std::unique_ptr<backends::Executable>> exe = compile_(body);
    if (!exe.ok()) return exe.status();
    auto plan = std::make_unique<CollectivePlan>(
        mesh_, std::vector<const ir::Function*>{(*exe)->function()});
    cache_.entries.push_back({&op, std::move(*exe), std::move(plan)});
    return &cache_.entries.back();
  }

  Runtime& rt_;
  const ir::Mesh& mesh_;
  const CompileFn& compile_;
  ShardMapCache& cache_;
};

Runtime::Runtime(RuntimeOptions options) : options_(options), id_(NextRuntimeId()) {
  int n = std::max(1, options_.num_devices);
  for (int i = 0; i < n; ++i) {
    devices_.push_back(std::make_unique<Device>(i));
    workers_.push_back(std::make_unique<Worker>());
  }
  num_threads_ = options_.num_threads > 0 ? options_.num_threads : backends::AvailableCores();
  pool_ = std::make_unique<backends::ThreadPool>(num_threads_ - 1);
  cores_ = std::make_unique<CoreSemaphore>(num_threads_);
  if (const char* path = std::getenv("SHARDJIT_PROFILE"); path != nullptr && *path != '\0') {
    profile_path_ = path;
  }
  if (options_.profile || !profile_path_.empty()) profiler_ = std::make_unique<Profiler>(n);
}

Runtime::~Runtime() {
  workers_.clear();  // finish queued work before the trace is written
  if (profiler_ != nullptr && !profile_path_.empty()) {
    if (absl::Status s = profiler_->WriteChromeTrace(profile_path_); !s.ok()) {
      std::fprintf(stderr, "shardjit: %s\n", std::string(s.message()).c_str());
    }
  }
}

absl::StatusOr<std::vector<std::vector<ir::Tensor>>> Runtime::RunSpmd(
    const ir::Mesh& mesh, const std::vector<const backends::Executable*>& programs,
    std::vector<std::vector<ir::Tensor>> args, const CollectivePlan* plan) {
  const int64_t n = ir::MeshSize(mesh);
  if (static_cast<int64_t>(programs.size()) != n || static_cast<int64_t>(args.size()) != n) {
    return absl::InvalidArgumentError(fmt::format(
        "RunSpmd: mesh {} has {} positions but got {} programs and {} argument lists",
        ir::MeshToString(mesh), n, programs.size(), args.size()));
  }
  for (int64_t p = 0; p < n; ++p) {
    int64_t id = mesh.device_ids_size() ? mesh.device_ids(p) : p;
    if (id < 0 || id >= num_devices()) {
      return absl::InvalidArgumentError(fmt::format(
          "RunSpmd: mesh position {} names device {}, but the runtime has {} devices", p, id,
          num_devices()));
    }
  }
  std::optional<CollectivePlan> own_plan;
  if (plan == nullptr) {
    std::vector<const ir::Function*> functions;
    for (const backends::Executable* program : programs) functions.push_back(program->function());
    plan = &own_plan.emplace(mesh, functions);
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  RunState run(*plan, options_.collective_timeout, cores_.get());
  std::vector<absl::StatusOr<std::vector<ir::Tensor>>> results(
      n, absl::UnknownError("not run"));
  std::mutex done_mu;
  std::condition_variable done_cv;
  int64_t remaining = n;
  const backends::Parallelism per_device{pool_.get(),
                                         static_cast<int>(std::max<int64_t>(1, num_threads_ / n))};
  for (int64_t p = 0; p < n; ++p) {
    int64_t id = mesh.device_ids_size() ? mesh.device_ids(p) : p;
    workers_[id]->Post([&, p, id] {
      backends::ScopedParallelism parallelism(per_device);
      SpmdContext ctx(run, p, *devices_[id],
                      profiler_ != nullptr ? profiler_->ForDevice(id) : nullptr);
      // A device that gets no core (the run failed while it queued) does not start.
      absl::StatusOr<std::vector<ir::Tensor>> r =
          run.TakeCore(p) ? programs[p]->Run(args[p], ctx) : run.status();
      for (size_t i = 0; r.ok() && i < r->size(); ++i) {
        if ((*r)[i].future() != nullptr) {  // it would outlive the run it belongs to
          r = absl::InvalidArgumentError(fmt::format(
              "result {} is a future ({}); await it first", i, (*r)[i].type().ToString()));
        }
      }
      if (!r.ok()) {
        run.Cancel(absl::Status(r.status().code(),
                                fmt::format("device {}: {}", id, r.status().message())));
      }
      args[p].clear();
      run.GiveCore(p);
      // Notify under the lock: once the caller sees remaining == 0 it destroys done_cv.
      std::lock_guard<std::mutex> lock(done_mu);
      results[p] = std::move(r);
      --remaining;
      done_cv.notify_one();
    });
  }
  {
    std::unique_lock<std::mutex> lock(done_mu);
    done_cv.wait(lock, [&] { return remaining == 0; });
  }
  if (absl::Status s = run.status(); !s.ok()) return s;
  std::vector<std::vector<ir::Tensor>> out;
  for (auto& r : results) out.push_back(std::move(*r));
  return out;
}

absl::StatusOr<std::vector<ir::Tensor>> Runtime::RunGlobal(const ir::Mesh& mesh,
                                                           const backends::Executable& program,
                                                           const std::vector<ir::Tensor>& args,
                                                           const CompileFn& compile,
                                                           ShardMapCache& cache) {
  GlobalContext ctx(*this, mesh, compile, cache);
  backends::ScopedParallelism parallelism({pool_.get(), num_threads_});
  return program.Run(args, ctx);
}

}  // namespace shardjit::runtime
