// The runtime across processes on this host (runtime/distributed/), side by side in one run with
// what it is judged against:
//  - psum, all_gather and ppermute (a ring) of f32 buffers between N processes of one device
//    each, through jit, against Gloo's own allreduce (ring), allgather and a send/recv pair on
//    the same buffers in a second Gloo context of the same processes; the same collectives
//    between N devices of one process for scale. Counter: GB/s of one device's operand. Then
//    ours and Gloo's counterpart in turns, each turn from a barrier, and the median ratio of the
//    pairs of turns (this shared machine drifts between benchmarks more than between two
//    turns): turns of back-to-back calls (the rate), and single calls (the latency; work a call
//    leaves running, e.g. a sender thread finishing, is not counted).
//  - the seed variants (examples/seed_variants.h) on a 2x2 mesh as N processes (each mesh row
//    split evenly over them) against 4 devices in one process, fused and as written;
//  - the share of communication hidden behind compute (runtime/overlap.h) in one profiled run of
//    each seed variant, across processes (process 0's devices) and in one process.
// Started without SHARDJIT_* variables it runs the one-process benchmarks on every core, then
// starts itself as N processes (runtime/distributed/launcher.h; they share the cores), whose
// process 0 prints its benchmarks; the parent prints the ratios last.
//
//   bazel run -c opt //bench:multiprocess -- [--processes=2] [--benchmark_filter=...]
//
// Google Benchmark takes its own flags (--benchmark_*) first, then absl flags parse the rest;
// --help lists both.
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "benchmark/benchmark.h"
#include "examples/seed_variants.h"
#include "fmt/format.h"
#include "gloo/allgather.h"
#include "gloo/barrier.h"
#include "gloo/allreduce.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "runtime/distributed/launcher.h"
#include "runtime/distributed/tcp_store.h"
#include "runtime/overlap.h"

ABSL_FLAG(int, processes, 2, "the processes of the job (at least 2)");

namespace shardjit {
namespace {

constexpr char kUsage[] =
    "usage: multiprocess [--processes=2] [Google Benchmark flags, e.g. --benchmark_filter=...]\n"
    "The runtime across processes against Gloo, and the seed variants as N processes against one\n"
    "process (bench/multiprocess.cc).\n";

// --help: this program's usage, then Google Benchmark's flags.
void PrintUsage() {
  std::fputs(kUsage, stdout);
  benchmark::PrintDefaultHelp();
}

constexpr char kResultsVariable[] = "SHARDJIT_BENCH_RESULTS";
constexpr int64_t kM = 2048, kK = 2048, kN = 1024;  // the seed notebook's product
constexpr int kRepetitions = 5;

const std::vector<int64_t>& BufferBytes() {
  static const auto* sizes = new std::vector<int64_t>{
      4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  return *sizes;
}

// Calls per repetition: about 256 MiB moved, at least 5 and at most 2000 calls. Fixed, so that
// every process runs the same calls.
int64_t Calls(int64_t bytes) { return std::clamp<int64_t>((256 << 20) / bytes, 5, 2000); }

// Median real times (µs) of benchmarks by name, printed or not as they come.
class Recorder : public benchmark::ConsoleReporter {
 public:
  explicit Recorder(bool print) : print_(print) {}
  bool ReportContext(const Context& context) override {
    return print_ ? ConsoleReporter::ReportContext(context) : true;
  }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name == "median") {
        median_us[run.run_name.function_name] = run.GetAdjustedRealTime();
        // RegisterInTurns's median ratio of a repetition, the median over repetitions.
        for (const char* counter : {"ratio", "cpu_ratio"}) {
          if (auto it = run.counters.find(counter); it != run.counters.end()) {
            median_us[run.run_name.function_name + "/" + counter] = it->second;
          }
        }
      }
    }
    if (print_) ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    if (print_) ConsoleReporter::Finalize();
  }

  std::map<std::string, double> median_us;

 private:
  bool print_;
};

benchmark::internal::Benchmark* Register(const std::string& name, int64_t calls,
                                         std::function<void(benchmark::State&)> body) {
  return benchmark::RegisterBenchmark(name.c_str(),
                                      [body](benchmark::State& state) { body(state); })
      ->Iterations(calls)
      ->Repetitions(kRepetitions)
      ->ReportAggregatesOnly(true)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

// ---------------------------------------------------------------------------------------------
// Collectives
// ---------------------------------------------------------------------------------------------

// The name of Gloo's counterpart of `op`.
std::string GlooName(const std::string& op) {
  return op == "psum" ? "allreduce" : op == "all_gather" ? "allgather" : "sendrecv";
}

// One call of Gloo's counterpart of `op` (allreduce, allgather, or a send/recv ring) on `bytes`
// of f32 per process, on buffers of its own.
std::function<void()> GlooCall(const std::shared_ptr<gloo::Context>& context,
                               const std::string& op, int64_t bytes) {
  const int rank = context->rank, size = context->size;
  const size_t elements = bytes / 4;
  auto in = std::make_shared<std::vector<float>>(elements, 1e-3f);
  auto out = std::make_shared<std::vector<float>>(elements * size);
  if (op == "psum") {
    return [context, out, elements] {
      gloo::AllreduceOptions options(context);
      options.setOutput(out->data(), elements);
      options.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      options.setTag(1);
      gloo::allreduce(options);
    };
  }
  if (op == "all_gather") {
    return [context, in, out, elements] {
      gloo::AllgatherOptions options(context);
      options.setInput(in->data(), elements);
      options.setOutput(out->data(), elements * context->size);
      options.setTag(2);
      gloo::allgather(options);
    };
  }
  std::shared_ptr<gloo::transport::UnboundBuffer> send =
      context->createUnboundBuffer(in->data(), bytes);
  std::shared_ptr<gloo::transport::UnboundBuffer> recv =
      context->createUnboundBuffer(out->data(), bytes);
  return [in, out, send, recv, rank, size] {
    recv->recv((rank + size - 1) % size, /*slot=*/3);
    send->send((rank + 1) % size, /*slot=*/3);
    send->waitSend();
    recv->waitRecv();
  };
}

// Gloo's counterpart of `op` as benchmark "gloo/<counterpart>/<bytes>".
void RegisterGloo(const std::shared_ptr<gloo::Context>& context, const std::string& op,
                  int64_t bytes) {
  std::function<void()> call = GlooCall(context, op, bytes);
  Register(fmt::format("gloo/{}/{}", GlooName(op), bytes), Calls(bytes),
           [call, bytes](benchmark::State& state) {
             for (auto _ : state) call();
             state.SetBytesProcessed(state.iterations() * bytes);
           });
}

// CPU time of this process (every thread) so far, in seconds.
double ProcessCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// "<kind>/<op>/<bytes>": `ours` and Gloo's counterpart in turns of back-to-back calls (which
// goes first alternates), each turn timed from a barrier of the processes (so that neither
// absorbs the other's tail in a peer). Counter "ratio" is the median over the pairs of turns of
// ours / Gloo's, which the machine's drift (it is shared) moves far less than the ratio of two
// benchmarks run one after the other; "cpu_ratio" the same for this process's CPU time, all
// turns together. kind "paired": single calls (a call's latency; work it leaves running is not
// counted); "turns": Calls(bytes) / 16 calls per turn (the rate back to back, at most one
// call's tail left out).
void RegisterInTurns(const std::shared_ptr<gloo::Context>& context, const std::string& kind,
                     const std::string& op, int64_t bytes, std::function<absl::Status()> ours) {
  std::function<void()> theirs = GlooCall(context, op, bytes);
  auto barrier = [context] {
    gloo::BarrierOptions options(context);
    options.setTag(4);
    gloo::barrier(options);
  };
  const int64_t per_turn = kind == "paired" ? 1 : std::max<int64_t>(1, Calls(bytes) / 16);
  const int64_t turns = kind == "paired" ? Calls(bytes) : 16;
  Register(fmt::format("{}/{}/{}", kind, op, bytes), turns,
           [ours, theirs, barrier, per_turn](benchmark::State& state) {
             // One turn from a barrier: {wall seconds, process CPU seconds}, or an error.
             auto turn = [&](bool mine) -> absl::StatusOr<std::pair<double, double>> {
               barrier();
               const double c0 = ProcessCpuSeconds();
               const auto t0 = std::chrono::steady_clock::now();
               for (int64_t i = 0; i < per_turn; ++i) {
                 if (!mine) {
                   theirs();
                 } else {
                   RETURN_IF_ERROR(ours());
                 }
               }
               const auto t1 = std::chrono::steady_clock::now();
               return std::make_pair(std::chrono::duration<double>(t1 - t0).count(),
                                     ProcessCpuSeconds() - c0);
             };
             std::vector<double> ratios;
             double cpu_ours = 0, cpu_theirs = 0;
             bool ours_first = true;  // alternately, so that neither always follows the other
             for (auto _ : state) {
               absl::StatusOr<std::pair<double, double>> a = turn(ours_first);
               absl::StatusOr<std::pair<double, double>> b = turn(!ours_first);
               if (!a.ok() || !b.ok()) {
                 return state.SkipWithError((a.ok() ? b : a).status().ToString().c_str());
               }
               const std::pair<double, double> mine = ours_first ? *a : *b;
               const std::pair<double, double> other = ours_first ? *b : *a;
               ratios.push_back(mine.first / other.first);
               cpu_ours += mine.second;
               cpu_theirs += other.second;
               ours_first = !ours_first;
             }
             std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
             state.counters["ratio"] = ratios[ratios.size() / 2];
             state.counters["cpu_ratio"] = cpu_ours / cpu_theirs;
           });
}

// psum, all_gather and ppermute (ring) of `bytes` of f32 per device through jit on `mesh` (one
// axis "x"), as benchmarks "<prefix>/<op>/<bytes>"; each followed by Gloo's counterpart when a
// `context` is given, so that the two run side by side (this machine's speed drifts).
void RegisterCollectives(const std::string& prefix, const Mesh& mesh,
                         const std::shared_ptr<gloo::Context>& context = nullptr) {
  const int64_t n = mesh.size();
  std::vector<std::pair<int64_t, int64_t>> ring;
  for (int64_t i = 0; i < n; ++i) ring.emplace_back(i, (i + 1) % n);
  const std::vector<std::pair<std::string, std::function<Tracer(Tracer)>>> ops = {
      {"psum", [](Tracer b) { return lax::psum(b, "x"); }},
      {"all_gather", [](Tracer b) { return lax::all_gather(b, "x", 0, /*tiled=*/true); }},
      {"ppermute", [ring](Tracer b) { return lax::ppermute(b, "x", ring); }},
  };
  for (int64_t bytes : BufferBytes()) {
    const int64_t elements = bytes / 4;
    auto input = std::make_shared<absl::StatusOr<Array>>(device_put(
        *random::normal(random::key(3), {n * elements}, DType::kF32), NamedSharding(mesh, P("x"))));
    for (const auto& [op, f] : ops) {
      auto program = std::make_shared<Jitted<Array>>(jit(shard_map(f, mesh, {P("x")}, {P("x")})));
      Register(fmt::format("{}/{}/{}", prefix, op, bytes), Calls(bytes),
               [input, program, bytes](benchmark::State& state) {
                 if (!input->ok()) return state.SkipWithError("device_put failed");
                 for (auto _ : state) {
                   absl::StatusOr<Array> out = (*program)(**input);
                   if (!out.ok()) return state.SkipWithError(out.status().ToString().c_str());
                 }
                 state.SetBytesProcessed(state.iterations() * bytes);
               });
      if (context == nullptr) continue;
      RegisterGloo(context, op, bytes);
      auto ours = [input, program]() -> absl::Status {
        if (!input->ok()) return input->status();
        return (*program)(**input).status();
      };
      RegisterInTurns(context, "turns", op, bytes, ours);
      RegisterInTurns(context, "paired", op, bytes, ours);
    }
  }
}

// A second Gloo context of this job's processes, met through the coordinator's store.
absl::StatusOr<std::shared_ptr<gloo::Context>> ConnectGloo(const ProcessGroup& group) {
  const char* coordinator = std::getenv("SHARDJIT_COORDINATOR");
  std::vector<std::string> host_port = absl::StrSplit(coordinator ? coordinator : "", ':');
  int port = 0;
  if (host_port.size() != 2 || !absl::SimpleAtoi(host_port[1], &port)) {
    return absl::InvalidArgumentError("the Gloo comparison needs SHARDJIT_COORDINATOR=host:port");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::TcpStore> store,
                   runtime::TcpStore::Connect(host_port[0], port, std::chrono::seconds(60)));
  auto context =
      std::make_shared<gloo::rendezvous::Context>(group.process_id(), group.num_processes());
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    gloo::rendezvous::PrefixStore prefix("bench/gloo", *store);
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    context->connectFullMesh(prefix, device);
  } catch (const std::exception& e) {
    return absl::UnavailableError(fmt::format("connecting Gloo: {}", e.what()));
  }
  return context;
}

// ---------------------------------------------------------------------------------------------
// Seed variants
// ---------------------------------------------------------------------------------------------

struct SeedCase {
  Mesh mesh;
  Array x, w;
  std::vector<examples::SeedVariant> fused, written;
};

absl::StatusOr<std::shared_ptr<SeedCase>> MakeSeedCase(const Mesh& mesh) {
  absl::StatusOr<Array> x = device_put(*random::normal(random::key(1), {kM, kK}, DType::kBF16),
                                       NamedSharding(mesh, P("x", "y")));
  absl::StatusOr<Array> w = device_put(*random::normal(random::key(2), {kK, kN}, DType::kBF16),
                                       NamedSharding(mesh, P("x", None)));
  if (!x.ok()) return x.status();
  if (!w.ok()) return w.status();
  return std::make_shared<SeedCase>(
      SeedCase{mesh, *x, *w, examples::SeedVariants(mesh, kK),
               examples::SeedVariants(mesh, kK, DefaultBackend(), {"collective-fusion"})});
}

// "<prefix>/seed/<variant>/fused" and ".../written".
void RegisterSeed(const std::string& prefix, std::shared_ptr<SeedCase> seed) {
  for (size_t v = 0; v < seed->fused.size(); ++v) {
    for (bool fused : {true, false}) {
      const std::string name =
          fmt::format("{}/seed/{}/{}", prefix, seed->fused[v].name, fused ? "fused" : "written");
      Register(name, 10, [seed, v, fused](benchmark::State& state) {
        const Jitted<Array>& program = fused ? seed->fused[v].program : seed->written[v].program;
        for (auto _ : state) {
          absl::StatusOr<Array> out = program(seed->x, seed->w);
          if (!out.ok()) return state.SkipWithError(out.status().ToString().c_str());
        }
        state.counters["GFLOPS"] =
            benchmark::Counter(2.0 * kM * kK * kN * state.iterations() / 1e9,
                               benchmark::Counter::kIsRate);
      });
    }
  }
}

// One profiled run of each fused variant: the share of its communication hidden behind
// kernels on this process's devices, as "hidden/<prefix>/<variant>".
absl::Status MeasureHidden(Runtime& rt, const std::string& prefix, const SeedCase& seed,
                           std::map<std::string, double>& results) {
  runtime::Profiler* profiler = rt.profiler();
  for (const examples::SeedVariant& v : seed.fused) {
    profiler->Clear();
    profiler->SetPaused(false);
    absl::StatusOr<Array> out = v.program(seed.x, seed.w);
    profiler->SetPaused(true);
    if (!out.ok()) return out.status();
    runtime::CommunicationOverlap overlap = runtime::MeasureOverlap(profiler->Events());
    results[fmt::format("hidden/{}/{}", prefix, v.name)] = overlap.hidden_share();
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// The two sides
// ---------------------------------------------------------------------------------------------

void WriteResults(const std::string& path, const std::map<std::string, double>& results) {
  std::ofstream out(path);
  for (const auto& [name, value] : results) out << name << '\t' << value << '\n';
}

std::map<std::string, double> ReadResults(const std::string& path) {
  std::map<std::string, double> results;
  std::ifstream in(path);
  std::string name;
  double value;
  while (in >> name >> value) results[name] = value;
  return results;
}

// One process of the job: the collectives between processes, Gloo's, and the seed variants.
int RunProcess() {
  absl::StatusOr<std::shared_ptr<ProcessGroup>> group = distributed::initialize();
  if (!group.ok() || *group == nullptr) {
    std::fprintf(stderr, "distributed::initialize: %s\n",
                 group.ok() ? "no job" : group.status().ToString().c_str());
    return 1;
  }
  const int processes = (*group)->num_processes(), id = (*group)->process_id();
  // Device 0 of each process joins the collectives; a 2x2 mesh spread evenly over the
  // processes (when 4 divides evenly) runs the seed variants.
  const int local = std::max(1, 4 / processes);
  Runtime rt({.num_devices = local, .profile = true, .processes = *group});
  rt.profiler()->SetPaused(true);
  std::vector<int64_t> firsts;
  for (int p = 0; p < processes; ++p) firsts.push_back(int64_t{p} * local);
  absl::StatusOr<Mesh> line = make_mesh(rt, {{"x", processes}}, firsts);
  if (!line.ok()) {
    std::fprintf(stderr, "%s\n", line.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::shared_ptr<gloo::Context>> context = ConnectGloo(**group);
  if (!context.ok()) {
    std::fprintf(stderr, "%s\n", context.status().ToString().c_str());
    return 1;
  }
  RegisterCollectives("procs", *line, *context);
  std::shared_ptr<SeedCase> seed;
  if (4 % processes == 0) {
    std::vector<int64_t> ids;
    for (int64_t p = 0; p < 4; ++p) ids.push_back(p / local * local + p % local);
    absl::StatusOr<Mesh> mesh = make_mesh(rt, {{"x", 2}, {"y", 2}}, ids);
    absl::StatusOr<std::shared_ptr<SeedCase>> made =
        mesh.ok() ? MakeSeedCase(*mesh) : absl::StatusOr<std::shared_ptr<SeedCase>>(mesh.status());
    if (!made.ok()) {
      std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
      return 1;
    }
    seed = *made;
    RegisterSeed("procs", seed);
  }
  Recorder recorder(/*print=*/id == 0);
  benchmark::RunSpecifiedBenchmarks(&recorder);
  std::map<std::string, double> results = recorder.median_us;
  if (seed != nullptr) {
    if (absl::Status s = MeasureHidden(rt, "procs", *seed, results); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  if (const char* path = std::getenv(kResultsVariable); path != nullptr && id == 0) {
    WriteResults(path, results);
  }
  benchmark::Shutdown();
  return 0;
}

std::string Cell(const std::map<std::string, double>& r, const std::string& name,
                 const char* format = "{:10.1f}") {
  auto it = r.find(name);
  return it == r.end() ? fmt::format("{:>10}", "-") : fmt::format(fmt::runtime(format), it->second);
}

std::string Ratio(const std::map<std::string, double>& r, const std::string& a,
                  const std::string& b) {
  auto x = r.find(a), y = r.find(b);
  if (x == r.end() || y == r.end() || y->second <= 0) return fmt::format("{:>7}", "-");
  return fmt::format("{:7.2f}", x->second / y->second);
}

void PrintSummary(int processes, const std::map<std::string, double>& r) {
  fmt::print("\nCollectives of f32 buffers between {} processes on loopback (one device each): "
             "median µs per call back to back, ours and Gloo's counterpart each in a benchmark of "
             "its own; turns: median ratio shardjit / Gloo over 16 pairs of turns of back-to-back "
             "calls, each turn from a barrier (the ratio to judge: free of the drift between "
             "benchmarks); paired: the same for single calls (latency; work a call leaves running "
             "is not counted); the same collective between {} devices of one process beside "
             "them\n",
             processes, processes);
  fmt::print("{:>10} {:>10} {:>10} {:>7} {:>7} {:>10} {:>10} {:>10} {:>7} {:>7} {:>10} {:>10} "
             "{:>10} {:>7} {:>7} {:>10}\n",
             "bytes", "psum", "allreduce", "turns", "paired", "in-proc", "all_gather",
             "allgather", "turns", "paired", "in-proc", "ppermute", "send/recv", "turns",
             "paired", "in-proc");
  for (int64_t bytes : BufferBytes()) {
    std::string row = fmt::format("{:>10}", bytes);
    for (auto [op, gloo] : std::vector<std::pair<std::string, std::string>>{
             {"psum", "allreduce"}, {"all_gather", "allgather"}, {"ppermute", "sendrecv"}}) {
      auto ratio = [&](const char* kind) {
        return Cell(r, fmt::format("{}/{}/{}/ratio", kind, op, bytes), "{:7.2f}");
      };
      row += " " + Cell(r, fmt::format("procs/{}/{}", op, bytes)) + " " +
             Cell(r, fmt::format("gloo/{}/{}", gloo, bytes)) + " " + ratio("turns") + " " +
             ratio("paired") + " " + Cell(r, fmt::format("inproc/{}/{}", op, bytes));
    }
    fmt::print("{}\n", row);
  }
  fmt::print("\nSeed variants, bf16 x[{},{}] @ w[{},{}] on a 2x2 mesh: median ms per call, as {} "
             "processes vs 4 devices in one process; hidden: share of communication behind "
             "kernels in one fused run\n",
             kM, kK, kK, kN, processes);
  fmt::print("{:>8} {:>12} {:>12} {:>7} {:>12} {:>12} {:>7} {:>10} {:>10}\n", "variant",
             "procs fused", "1-proc fused", "ratio", "procs wrtn", "1-proc wrtn", "ratio",
             "hidden", "1-proc hid");
  std::map<std::string, double> ms;
  for (const auto& [k, value] : r) ms[k] = value / 1e3;
  for (const std::string v : {"a", "b", "c", "d", "e", "f"}) {
    auto name = [&](const char* side, const char* mode) {
      return fmt::format("{}/seed/{}/{}", side, v, mode);
    };
    fmt::print("{:>8} {:>12} {:>12} {} {:>12} {:>12} {} {:>10} {:>10}\n", "(" + v + ")",
               Cell(ms, name("procs", "fused"), "{:12.2f}"),
               Cell(ms, name("inproc", "fused"), "{:12.2f}"),
               Ratio(r, name("procs", "fused"), name("inproc", "fused")),
               Cell(ms, name("procs", "written"), "{:12.2f}"),
               Cell(ms, name("inproc", "written"), "{:12.2f}"),
               Ratio(r, name("procs", "written"), name("inproc", "written")),
               Cell(r, "hidden/procs/" + v, "{:10.2f}"), Cell(r, "hidden/inproc/" + v, "{:10.2f}"));
  }
}

// The parent: the one-process benchmarks on every core, then the job; prints the ratios.
// `args`: the command line as given, for the job's processes.
int RunParent(int processes, const std::vector<std::string>& args) {
  std::map<std::string, double> results;
  {
    Runtime rt({.num_devices = 4, .profile = true});
    rt.profiler()->SetPaused(true);
    std::vector<int64_t> ids;
    for (int p = 0; p < processes && p < 4; ++p) ids.push_back(p);
    absl::StatusOr<Mesh> line = make_mesh(rt, {{"x", static_cast<int64_t>(ids.size())}}, ids);
    absl::StatusOr<Mesh> square = make_mesh(rt, {{"x", 2}, {"y", 2}});
    if (!line.ok() || !square.ok()) return 1;
    RegisterCollectives("inproc", *line);
    absl::StatusOr<std::shared_ptr<SeedCase>> seed = MakeSeedCase(*square);
    if (!seed.ok()) {
      std::fprintf(stderr, "%s\n", seed.status().ToString().c_str());
      return 1;
    }
    RegisterSeed("inproc", *seed);
    Recorder recorder(/*print=*/true);
    benchmark::RunSpecifiedBenchmarks(&recorder);
    benchmark::ClearRegisteredBenchmarks();
    results = recorder.median_us;
    if (absl::Status s = MeasureHidden(rt, "inproc", **seed, results); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  char dir_template[] = "/tmp/shardjit_bench_XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return 1;
  const std::string path = std::string(dir) + "/results.tsv";
  setenv(kResultsVariable, path.c_str(), 1);
  fmt::print("\n{} processes:\n", processes);
  absl::StatusOr<int> status =
      runtime::LaunchSelf(processes, args);
  if (!status.ok() || *status != 0) {
    std::fprintf(stderr, "the job failed: %s\n",
                 status.ok() ? fmt::format("status {}", *status).c_str()
                             : status.status().ToString().c_str());
    return 1;
  }
  for (const auto& [name, value] : ReadResults(path)) results[name] = value;
  std::remove(path.c_str());
  rmdir(dir);
  PrintSummary(processes, results);
  return 0;
}

}  // namespace
}  // namespace shardjit

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(shardjit::kUsage);
  const std::vector<std::string> args(argv + 1, argv + argc);
  benchmark::Initialize(&argc, argv, shardjit::PrintUsage);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (benchmark::ReportUnrecognizedArguments(static_cast<int>(rest.size()), rest.data())) return 2;
  const int processes = absl::GetFlag(FLAGS_processes);
  if (processes < 2) {
    std::fprintf(stderr, "--processes must be at least 2\n");
    return 2;
  }
  if (std::getenv("SHARDJIT_NUM_PROCESSES") != nullptr) return shardjit::RunProcess();
  return shardjit::RunParent(processes, args);
}
