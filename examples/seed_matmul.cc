// The main job: every variant of the seed notebook's bf16 matmul (x[M,K] @ w[K,N], x sharded
// P('x','y'), w P('x', None)) on a 2x2 and a 4x4 mesh of virtual devices, each checked against
// an f64 reference (the notebook's diagnostics) and timed (median of repeated runs) as jit
// compiles it (collective-fusion on) and as written (the pass disabled), with the memory each
// needs per device beyond its inputs (the largest device's peak in the runs).
//
//   bazel run -c opt //examples:seed_matmul -- [--m=2048 --k=2048 --n=1024 --runs=10
//                                              --meshes=2x2,4x4 --backend=x86|reference
//                                              --trace=path.json --processes=N]
//
// --trace writes a Chrome trace (open in Perfetto) of one extra run of each variant.
// --processes=N runs the job as N processes on this host (runtime/distributed/launcher.h), each
// mesh spread evenly over them in row-major order (for 2 processes, a 2x2 mesh's row x=0 lives in
// process 0 and x=1 in process 1), so collectives over x cross processes. Started with the
// SHARDJIT_* variables set (by //tools:launch, or by hand on several hosts), it joins that job.
// Process 0 prints; each process writes its own trace (path.pK.json).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "examples/seed_variants.h"
#include "fmt/format.h"
#include "frontend/distributed.h"
#include "ir/fmt_absl.h"
#include "ir/ir.pb.h"
#include "runtime/device.h"
#include "runtime/distributed/launcher.h"

ABSL_FLAG(int64_t, m, 2048, "rows of x");
ABSL_FLAG(int64_t, k, 2048, "columns of x, rows of w (the contracting size)");
ABSL_FLAG(int64_t, n, 1024, "columns of w");
ABSL_FLAG(int, runs, 10, "timed runs per variant (the median and p90 are printed)");
ABSL_FLAG(int, warmup, 2, "untimed runs per variant before them");
ABSL_FLAG(std::string, meshes, "2x2,4x4", "the meshes, XxY, comma-separated");
ABSL_FLAG(shardjit::Backend, backend, shardjit::DefaultBackend(),
          "x86 or reference (default: SHARDJIT_BACKEND's choice, else x86)");
ABSL_FLAG(std::string, trace, "",
          "write a Chrome trace of one extra run of each variant to this file (path.pK.json "
          "for process K of a job)");
ABSL_FLAG(int, processes, 1, "run the job as this many processes on this host");

namespace shardjit::examples {
namespace {

constexpr char kUsage[] =
    "usage: seed_matmul [--m=2048] [--k=2048] [--n=1024] [--runs=10] [--warmup=2] "
    "[--meshes=2x2,4x4] [--backend=x86|reference] [--trace=path.json] [--processes=N]\n";

struct Flags {
  int64_t m = 2048, k = 2048, n = 1024;
  int runs = 10;
  int warmup = 2;
  std::vector<std::pair<int64_t, int64_t>> meshes = {{2, 2}, {4, 4}};
  Backend backend = DefaultBackend();
  std::string trace;  // Chrome trace of one run per variant; empty: none
  int processes = 1;  // >1: run as that many processes of one job
  std::vector<std::string> args;  // as given, for the processes' command line
};

// The flags (set by absl::ParseCommandLine) into `flags`; false for a bad value.
bool ReadFlags(Flags& flags) {
  flags.m = absl::GetFlag(FLAGS_m);
  flags.k = absl::GetFlag(FLAGS_k);
  flags.n = absl::GetFlag(FLAGS_n);
  flags.runs = absl::GetFlag(FLAGS_runs);
  flags.warmup = absl::GetFlag(FLAGS_warmup);
  flags.trace = absl::GetFlag(FLAGS_trace);
  flags.processes = absl::GetFlag(FLAGS_processes);
  flags.backend = absl::GetFlag(FLAGS_backend);
  flags.meshes.clear();
  for (absl::string_view m : absl::StrSplit(absl::GetFlag(FLAGS_meshes), ',')) {
    std::vector<std::string> xy = absl::StrSplit(m, 'x');
    int64_t a, b;
    if (xy.size() != 2 || !absl::SimpleAtoi(xy[0], &a) || !absl::SimpleAtoi(xy[1], &b)) {
      return false;
    }
    flags.meshes.push_back({a, b});
  }
  return flags.m >= 0 && flags.k >= 0 && flags.n >= 0 && flags.warmup >= 0 && flags.runs > 0 &&
         flags.processes > 0;
}

// out[M,N] = x[M,K] @ w[K,N] in double precision from the bf16 inputs.
std::vector<double> ReferenceMatmul(const Tensor& x, const Tensor& w) {
  const int64_t m = x.dims()[0], k = x.dims()[1], n = w.dims()[1];
  std::vector<double> xd = x.ToDoubles(), wd = w.ToDoubles(), out(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    double* row = &out[i * n];
    for (int64_t p = 0; p < k; ++p) {
      const double a = xd[i * k + p];
      const double* wrow = &wd[p * n];
      for (int64_t j = 0; j < n; ++j) row[j] += a * wrow[j];
    }
  }
  return out;
}

struct Diff {
  double max = 0, mean = 0, median = 0, share_over_0_1 = 0;
};

Diff Compare(const Tensor& got, const std::vector<double>& want) {
  std::vector<double> d(want.size());
  Diff diff;
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    d[i] = std::abs(got.GetDouble(static_cast<int64_t>(i)) - want[i]);
    diff.max = std::max(diff.max, d[i]);
    diff.mean += d[i];
    bad += d[i] > 0.1;
  }
  diff.mean /= static_cast<double>(d.size());
  diff.share_over_0_1 = 100.0 * static_cast<double>(bad) / static_cast<double>(d.size());
  std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
  diff.median = d[d.size() / 2];
  return diff;
}

struct Timing {
  absl::StatusOr<Array> out;
  double median_ms = 0;
  double p90_ms = 0;
  // The largest rise of a device's peak memory in the runs above what it held before them (over
  // this process's devices).
  double work_mib = 0;
};

Timing Time(Runtime& rt, const Mesh& mesh, const Jitted<Array>& program, const Array& x,
            const Array& w, const Flags& flags) {
  Timing t;
  for (int i = 0; i < flags.warmup; ++i) t.out = program(x, w);
  std::vector<int64_t> held;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    const int64_t id = mesh.proto().device_ids(p);
    if (!rt.is_local(id)) {  // another process's device
      held.push_back(0);
      continue;
    }
    runtime::AccountingAllocator* a = rt.device(id).allocator();
    a->ResetPeak();
    held.push_back(a->stats().current_bytes);
  }
  std::vector<double> times;
  for (int i = 0; i < flags.runs && (t.out.ok() || flags.warmup == 0); ++i) {
    auto start = std::chrono::steady_clock::now();
    t.out = program(x, w);
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    if (!t.out.ok()) return t;
  }
  std::sort(times.begin(), times.end());
  t.median_ms = times[times.size() / 2];
  t.p90_ms = times[times.size() * 9 / 10];
  int64_t work = 0;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    const int64_t id = mesh.proto().device_ids(p);
    if (rt.is_local(id)) work = std::max(work, rt.memory(id).peak_bytes - held[p]);
  }
  t.work_mib = static_cast<double>(work) / (1 << 20);
  return t;
}

// A mesh over the job's devices: positions in row-major order spread evenly over the processes,
// each process's share on its first devices (all of them in one process when it runs alone).
absl::StatusOr<Mesh> JobMesh(Runtime& rt, int64_t sx, int64_t sy) {
  const int64_t size = sx * sy, processes = rt.num_processes();
  if (size % processes != 0) {
    return absl::InvalidArgumentError(fmt::format(
        "mesh {}x{} has {} devices, not a multiple of the job's {} processes", sx, sy, size,
        processes));
  }
  const int64_t per_process = size / processes;
  std::vector<int64_t> ids(size);
  for (int64_t p = 0; p < size; ++p) {
    ids[p] = p / per_process * rt.num_local_devices() + p % per_process;
  }
  return make_mesh(rt, {{"x", sx}, {"y", sy}}, ids);
}

// The whole result on every process (a gather when other processes hold blocks of it).
absl::StatusOr<Tensor> Gathered(const Array& array) {
  return array.fully_addressable() ? array.to_host() : process_allgather(array);
}

int Run(const Flags& flags) {
  absl::StatusOr<std::shared_ptr<ProcessGroup>> group = distributed::initialize();
  if (!group.ok()) {
    std::fprintf(stderr, "distributed::initialize: %s\n",
                 std::string(group.status().message()).c_str());
    return 1;
  }
  const int processes = *group != nullptr ? (*group)->num_processes() : 1;
  if (flags.processes > 1 && flags.processes != processes) {
    std::fprintf(stderr, "--processes=%d, but this process is one of a job of %d\n",
                 flags.processes, processes);
    return 1;
  }
  int64_t devices = 1;
  for (const auto& [a, b] : flags.meshes) devices = std::max(devices, a * b);
  Runtime rt({.num_devices = static_cast<int>(std::max<int64_t>(1, devices / processes)),
              .profile = !flags.trace.empty(),
              .processes = *group});
  // Only process 0 prints results (every process runs every variant).
  const bool printer = rt.process_id() == 0;
  // Only --trace's profiler pauses between runs ($SHARDJIT_PROFILE alone records everything).
  runtime::Profiler* profiler = flags.trace.empty() ? nullptr : rt.profiler();
  if (profiler != nullptr) profiler->SetPaused(true);
  absl::StatusOr<Tensor> x_host = random::normal(random::key(1), {flags.m, flags.k}, DType::kBF16);
  absl::StatusOr<Tensor> w_host = random::normal(random::key(2), {flags.k, flags.n}, DType::kBF16);
  if (!x_host.ok() || !w_host.ok()) {
    std::fprintf(stderr, "random: %s\n", std::string(x_host.status().message()).c_str());
    return 1;
  }
  std::vector<double> reference;
  if (printer) {
    std::printf("shardjit seed matmul: bf16 x[%ld,%ld] @ w[%ld,%ld], %s backend", flags.m, flags.k,
                flags.k, flags.n, flags.backend == Backend::kX86 ? "x86" : "reference");
    if (processes > 1) {
      std::printf(", %d processes of %d devices (%d threads each)", processes,
                  rt.num_local_devices(), rt.num_threads());
    }
    std::printf("\n");
    reference = ReferenceMatmul(*x_host, *w_host);
  }
  for (const auto& [sx, sy] : flags.meshes) {
    absl::StatusOr<Mesh> mesh = JobMesh(rt, sx, sy);
    if (!mesh.ok()) {
      std::fprintf(stderr, "%s\n", std::string(mesh.status().message()).c_str());
      return 1;
    }
    absl::StatusOr<Array> x = device_put(*x_host, NamedSharding(*mesh, P("x", "y")));
    absl::StatusOr<Array> w = device_put(*w_host, NamedSharding(*mesh, P("x", None)));
    if (!x.ok() || !w.ok()) {
      std::fprintf(stderr, "device_put: %s %s\n", std::string(x.status().message()).c_str(),
                   std::string(w.status().message()).c_str());
      return 1;
    }
    if (printer) {
      std::printf("\nmesh %s (%ld devices)\n", mesh->to_string().c_str(), mesh->size());
      std::printf("%-3s %-6s %10s %10s %10s %8s %10s %9s %10s %9s %9s  %s\n", "", "dtype",
                "max diff", "mean diff", "median", "% >0.1", "fused ms", "fused p90",
                  "written ms", "fused MiB", "written MiB", "variant");
    }
    std::vector<SeedVariant> fused = SeedVariants(*mesh, flags.k, flags.backend);
    std::vector<SeedVariant> written =
        SeedVariants(*mesh, flags.k, flags.backend, {"collective-fusion"});
    for (size_t i = 0; i < fused.size(); ++i) {
      const SeedVariant& v = fused[i];
      Timing as_compiled = Time(rt, *mesh, fused[i].program, *x, *w, flags);
      Timing as_written = Time(rt, *mesh, written[i].program, *x, *w, flags);
      for (const Timing* t : {&as_compiled, &as_written}) {
        if (!t->out.ok()) {
          std::printf("(%s) FAILED: %s\n", v.name.c_str(),
                      std::string(t->out.status().message()).c_str());
          return 1;
        }
      }
      if (profiler != nullptr) {
        // One traced run, under a host span naming the variant and mesh.
        profiler->SetPaused(false);
        const int64_t start_ns = base::SpanClockNs();
        absl::StatusOr<Array> traced = v.program(*x, *w);
        const std::string name = fmt::format("({}) {}", v.name, mesh->to_string());
        profiler->Record(runtime::Profiler::kHost,
                         {name, "variant", start_ns, base::SpanClockNs() - start_ns, {}});
        profiler->SetPaused(true);
        if (!traced.ok()) {
          std::printf("(%s) FAILED: %s\n", v.name.c_str(),
                      std::string(traced.status().message()).c_str());
          return 1;
        }
      }
      absl::StatusOr<Tensor> result = Gathered(*as_compiled.out);
      if (!result.ok()) {
        std::printf("(%s) FAILED: %s\n", v.name.c_str(),
                    std::string(result.status().message()).c_str());
        return 1;
      }
      if (!printer) continue;
      Diff d = Compare(*result, reference);
      std::printf(
          "(%s) %-6s %10.4g %10.4g %10.4g %7.2f%% %10.3f %9.3f %10.3f %9.1f %11.1f  %s\n",
          v.name.c_str(), std::string(ir::DTypeName(result->dtype())).c_str(), d.max, d.mean,
          d.median, d.share_over_0_1, as_compiled.median_ms, as_compiled.p90_ms,
          as_written.median_ms, as_compiled.work_mib, as_written.work_mib, v.description.c_str());
    }
  }
  if (profiler != nullptr) {
    const std::string path =
        runtime::ProcessTracePath(flags.trace, rt.process_id(), rt.num_processes());
    if (absl::Status s = profiler->WriteChromeTrace(path); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::printf("\ntrace: %s (%zu spans)\n", path.c_str(), profiler->Events().size());
  }
  return 0;
}

// Runs this program as `flags.processes` processes of one job on this host; their exit status.
int LaunchJob(const Flags& flags) {
  absl::StatusOr<int> status = runtime::LaunchSelf(flags.processes, flags.args);
  if (!status.ok()) {
    std::fprintf(stderr, "launch: %s\n", std::string(status.status().message()).c_str());
    return 1;
  }
  return *status;
}

}  // namespace
}  // namespace shardjit::examples

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(shardjit::examples::kUsage);
  shardjit::examples::Flags flags;
  flags.args.assign(argv + 1, argv + argc);  // as given, for the job's processes
  if (absl::ParseCommandLine(argc, argv).size() != 1 || !shardjit::examples::ReadFlags(flags)) {
    std::fprintf(stderr, "%s", shardjit::examples::kUsage);
    return 2;
  }
  // --processes=N starts the job's processes unless this is one of them.
  if (flags.processes > 1 && std::getenv("SHARDJIT_NUM_PROCESSES") == nullptr) {
    return shardjit::examples::LaunchJob(flags);
  }
  return shardjit::examples::Run(flags);
}
