// How soon a cancelled run returns: a run inside one long GEMM (an f32 product sized to take
// about --gemm_seconds=S on this host, 2 s by default) is cancelled from another thread halfway
// through, and the time from Cancel() to the run's return is the iteration's (manual) time. The
// same for a deadline that passes halfway. Counters: the uncancelled GEMM's seconds, and the
// share of it the run had done when it stopped. Google Benchmark takes its own flags
// (--benchmark_*) first, then absl flags parse the rest; --help lists both.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "benchmark/benchmark.h"
#include "frontend/shardjit.h"

ABSL_FLAG(double, gemm_seconds, 2.0,
          "size the GEMM to take about this many seconds on this host");

namespace shardjit {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One device using every core, and a product of n x n by n x n, n chosen so it takes about
// `target_seconds` (measured once).
struct LongGemm {
  Runtime rt{{.num_devices = 1}};
  Mesh mesh = *make_mesh(rt, {{"i", 1}});
  Jitted<Array> product = jit(shard_map([](Tracer a, Tracer b) { return jnp::matmul(a, b); }, mesh,
                                        {P("i"), P()}, {P("i")}));
  std::vector<Array> args;  // x (n x n), w (n x n)
  double gemm_seconds = 0;

  explicit LongGemm(double target_seconds) {
    int64_t n = 1024;
    for (;;) {
      args = {*device_put(*random::normal(random::key(1), {n, n}), NamedSharding(mesh, P("i"))),
              *device_put(*random::normal(random::key(2), {n, n}), NamedSharding(mesh, P()))};
      const auto start = Clock::now();
      if (!product.call(args).ok()) std::abort();
      gemm_seconds = Seconds(Clock::now() - start);
      if (gemm_seconds >= 0.7 * target_seconds || n >= 16384) break;
      // Time grows as n^3; step at most 2x in n per measurement.
      const double scale = std::cbrt(target_seconds / std::max(gemm_seconds, 1e-3));
      n = std::min<int64_t>(16384, static_cast<int64_t>(n * std::min(2.0, scale)) / 64 * 64);
    }
  }
};

LongGemm& Shared() {
  static LongGemm* gemm = new LongGemm(absl::GetFlag(FLAGS_gemm_seconds));
  return *gemm;
}

void BM_CancelInsideGemm(benchmark::State& state) {
  LongGemm& g = Shared();
  double stopped_share = 0;
  for (auto _ : state) {
    RunOptions options;
    options.cancel = std::make_shared<CancellationToken>();
    absl::Status status;
    Clock::time_point returned_at;
    const auto start = Clock::now();
    std::thread run([&] {
      status = g.product.call(g.args, options).status();
      returned_at = Clock::now();
    });
    std::this_thread::sleep_for(std::chrono::duration<double>(g.gemm_seconds / 2));
    const auto cancelled_at = Clock::now();
    options.cancel->Cancel();
    run.join();
    if (!absl::IsCancelled(status)) state.SkipWithError("the run was not cancelled");
    state.SetIterationTime(Seconds(returned_at - cancelled_at));
    stopped_share = Seconds(returned_at - start) / g.gemm_seconds;
  }
  state.counters["gemm_s"] = g.gemm_seconds;
  state.counters["stopped_at"] = stopped_share;
}
BENCHMARK(BM_CancelInsideGemm)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_DeadlineInsideGemm(benchmark::State& state) {
  LongGemm& g = Shared();
  double stopped_share = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    const absl::Duration half = absl::Seconds(g.gemm_seconds / 2);
    absl::Status status = g.product.call(g.args, RunOptions::WithTimeout(half)).status();
    const auto returned_at = Clock::now();
    if (!absl::IsDeadlineExceeded(status)) state.SkipWithError("the deadline did not stop it");
    state.SetIterationTime(Seconds(returned_at - start) - absl::ToDoubleSeconds(half));
    stopped_share = Seconds(returned_at - start) / g.gemm_seconds;
  }
  state.counters["gemm_s"] = g.gemm_seconds;
  state.counters["stopped_at"] = stopped_share;
}
BENCHMARK(BM_DeadlineInsideGemm)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);

constexpr char kUsage[] =
    "usage: cancellation [--gemm_seconds=2] [Google Benchmark flags, e.g. --benchmark_filter=...]\n"
    "How soon a run cancelled, or at its deadline, inside one long GEMM returns "
    "(bench/cancellation.cc).\n";

// --help: this program's usage, then Google Benchmark's flags.
void PrintUsage() {
  std::fputs(kUsage, stdout);
  benchmark::PrintDefaultHelp();
}

}  // namespace
}  // namespace shardjit

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(shardjit::kUsage);
  benchmark::Initialize(&argc, argv, shardjit::PrintUsage);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (benchmark::ReportUnrecognizedArguments(static_cast<int>(rest.size()), rest.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
