// Kernels that talk between devices (remote copies and semaphores) on the x86 backend, side by
// side in one run with what shardjit builds in for the same job:
// - seed 001's bidirectional collective matmul kernel (examples/kernels/collective_matmul.h)
//   against all_gather(x, axis, 1, tiled) @ w lowered by the default pipeline (collective-fusion
//   turns it into a ring), bf16 in, f32 out, x[1024, 1024] sharded over rings of 2 and 4, w
//   [1024, 1024]; GFLOP/s per device;
// - seed 000's ring all-gather kernel (examples/kernels/ring_all_gather.h) against the built-in
//   all_gather over x on {x:2, y:1}, {x:2, y:2} and {x:4, y:4}, f32 shards of 256x1024; GB/s
//   gathered per device (bench/xla_pallas_ring.py runs the {x:2} case in JAX's interpreter);
// - compiling each kernel: trace + lower + the first run, in ms.
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "examples/kernels/collective_matmul.h"
#include "examples/kernels/ring_all_gather.h"
#include "frontend/shardjit.h"

namespace shardjit {
namespace {

template <typename F>
void Time(benchmark::State& state, F&& run) {
  if (absl::StatusOr<Array> warm = run(); !warm.ok()) {
    state.SkipWithError(std::string(warm.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    absl::StatusOr<Array> out = run();
    benchmark::DoNotOptimize(out);
  }
}

void CollectiveMatmul(benchmark::State& state, bool kernel) {
  const int64_t n = state.range(0), m = 1024, k = 1024, cols = 1024;
  Runtime rt({.num_devices = static_cast<int>(n)});
  Mesh mesh = *make_mesh(rt, {{"i", n}});
  Array x = *device_put(*random::normal(random::key(1), {m, k}, DType::kBF16),
                        NamedSharding(mesh, P(None, "i")));
  Array w = *device_put(*random::normal(random::key(2), {k, cols}, DType::kBF16),
                        NamedSharding(mesh, P()));
  auto builtin = jit(shard_map(
      [](Tracer a, Tracer b) {
        return lax::dot_general(lax::all_gather(a, "i", 1, true), b, DotDims{{1}, {0}},
                                DType::kF32);
      },
      mesh, {P(None, "i"), P()}, {P()}, /*check_vma=*/false));
  absl::StatusOr<Jitted<Array>> user = examples::CollectiveMatmulKernelProgram(mesh, "i");
  Time(state, [&] { return kernel ? (*user)(x, w) : builtin(x, w); });
  state.counters["GFLOP/s/device"] =
      benchmark::Counter(2.0 * m * k * cols * state.iterations() / 1e9,
                         benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(CollectiveMatmul, pallas_kernel, true)
    ->Arg(2)->Arg(4)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(CollectiveMatmul, all_gather_dot, false)
    ->Arg(2)->Arg(4)->UseRealTime()->Unit(benchmark::kMillisecond);

void RingAllGather(benchmark::State& state, bool kernel) {
  const int64_t sx = state.range(0), sy = state.range(1), h = 256, w = 1024;
  Runtime rt({.num_devices = static_cast<int>(sx * sy)});
  Mesh mesh = *make_mesh(rt, {{"x", sx}, {"y", sy}});
  Array x = *device_put(*random::normal(random::key(3), {sx * h, w}),
                        NamedSharding(mesh, P("x", None)));
  auto builtin = jit(shard_map([](Tracer a) { return lax::all_gather(a, "x", 0, true); }, mesh,
                               {P("x", None)}, {P(None, None)}, /*check_vma=*/false));
  auto user = examples::RingAllGatherProgram(mesh, "x");
  Time(state, [&] { return kernel ? user(x) : builtin(x); });
  state.counters["GB/s/device"] = benchmark::Counter(
      4.0 * sx * h * w * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
void RingMeshes(benchmark::internal::Benchmark* b) {
  b->Args({2, 1})->Args({2, 2})->Args({4, 4})->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK_CAPTURE(RingAllGather, pallas_kernel, true)->Apply(RingMeshes);
BENCHMARK_CAPTURE(RingAllGather, all_gather, false)->Apply(RingMeshes);

// A fresh jit of each kernel traced, lowered and run once on small operands.
void CompileKernel(benchmark::State& state, bool matmul) {
  Runtime rt({.num_devices = 4, .num_threads = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  Array x = *device_put(*random::normal(random::key(4), {8, 16}, DType::kBF16),
                        NamedSharding(mesh, matmul ? P(None, "x") : P("x", None)));
  Array w = *device_put(*random::normal(random::key(5), {16, 8}, DType::kBF16),
                        NamedSharding(mesh, P()));
  for (auto _ : state) {
    absl::StatusOr<Array> out =
        matmul ? (*examples::CollectiveMatmulKernelProgram(mesh, "x"))(x, w)
               : examples::RingAllGatherProgram(mesh, "x")(x);
    if (!out.ok()) state.SkipWithError(std::string(out.status().message()).c_str());
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK_CAPTURE(CompileKernel, collective_matmul, true)
    ->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(CompileKernel, ring_all_gather, false)
    ->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardjit

BENCHMARK_MAIN();
