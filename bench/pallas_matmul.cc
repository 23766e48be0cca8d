// User kernels (pl::pallas_call) on the x86 backend, side by side in one run:
// - seed 000's blocked matmul (examples/kernels/blocked_matmul.h, 128^3 blocks) against the
//   built-in dot_general of the same product, 2048x2048 @ 2048x1024 and 512^3, bf16 and f32
//   inputs, f32 out, on every thread of the runtime (SHARDJIT_NUM_THREADS, default all cores);
// - seed 003's gmm and tgmm kernels (examples/kernels/gmm.h) against the built-in lax::gmm and
//   lax::tgmm, and gmm with a bf16 result;
// - the per-grid-step overhead: an empty kernel over a 10^5-step grid, in ns per step;
// - compiling the seed kernel: trace + lower + compile of a fresh jit and its first run on one
//   128^3 block (the x86 backend compiles a kernel at its first run), in ms.
#include <string>

#include "benchmark/benchmark.h"
#include "examples/kernels/blocked_matmul.h"
#include "examples/kernels/gmm.h"
#include "frontend/shardjit.h"

namespace shardjit {
namespace {

// x[m,k] @ y[k,n] in `dtype` with f32 out: the user kernel or the built-in dot_general.
void Matmul(benchmark::State& state, DType dtype, bool kernel) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(*random::normal(random::key(1), {m, k}, dtype), NamedSharding(mesh, P()));
  Array y = *device_put(*random::normal(random::key(2), {k, n}, dtype), NamedSharding(mesh, P()));
  auto f = kernel
               ? jit([=](Tracer a, Tracer b) { return examples::BlockedMatmul(m, k, n)(a, b)[0]; })
               : jit([](Tracer a, Tracer b) {
                   return lax::dot_general(a, b, DotDims{{1}, {0}}, DType::kF32);
                 });
  if (absl::StatusOr<Array> warm = f(x, y); !warm.ok()) {
    state.SkipWithError(std::string(warm.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    absl::StatusOr<Array> out = f(x, y);
    benchmark::DoNotOptimize(out);
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * k * n * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
void MatmulSizes(benchmark::internal::Benchmark* b) {
  b->Args({2048, 2048, 1024})->Args({512, 512, 512})->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK_CAPTURE(Matmul, bf16_pallas_kernel, DType::kBF16, true)->Apply(MatmulSizes);
BENCHMARK_CAPTURE(Matmul, bf16_dot_general, DType::kBF16, false)->Apply(MatmulSizes);
BENCHMARK_CAPTURE(Matmul, f32_pallas_kernel, DType::kF32, true)->Apply(MatmulSizes);
BENCHMARK_CAPTURE(Matmul, f32_dot_general, DType::kF32, false)->Apply(MatmulSizes);

// Seed 003's gmm and tgmm as user kernels (128^3 tiles) against the built-in lax::gmm and
// lax::tgmm, over 8 groups of uneven sizes (most starting inside tiles) of m = 2048 rows, bf16
// operands, f32 out (or `out`). gmm: lhs [2048, 1024], rhs [8, 1024, 1024]; tgmm: lhs
// [1024, 2048] (k, m), rhs [2048, 1024]. GFLOP/s counts the grouped rows only.
void Grouped(benchmark::State& state, bool transposed, bool kernel, DType out = DType::kF32) {
  const int64_t m = 2048, k = 1024, n = 1024;
  const std::vector<double> sizes = {300, 129, 0, 511, 200, 77, 431, 400};
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  auto normal = [&](int key, std::vector<int64_t> dims) {
    return *device_put(*random::normal(random::key(key), std::move(dims), DType::kBF16),
                       NamedSharding(mesh, P()));
  };
  Array x = transposed ? normal(1, {k, m}) : normal(1, {m, k});
  Array y = transposed ? normal(2, {m, n}) : normal(2, {8, k, n});
  Array g = *device_put(HostTensor(DType::kS32, {8}, sizes), NamedSharding(mesh, P()));
  auto f = jit([=](Tracer a, Tracer b, Tracer s) {
    if (transposed) return kernel ? examples::Tgmm(a, b, s) : lax::tgmm(a, b, s);
    return kernel ? examples::Gmm(a, b, s, {}, out) : lax::gmm(a, b, s, out);
  });
  if (absl::StatusOr<Array> warm = f(x, y, g); !warm.ok()) {
    state.SkipWithError(std::string(warm.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    absl::StatusOr<Array> out = f(x, y, g);
    benchmark::DoNotOptimize(out);
  }
  double rows = 0;
  for (double v : sizes) rows += v;
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * k * n * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}
void GroupedOptions(benchmark::internal::Benchmark* b) {
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK_CAPTURE(Grouped, gmm_pallas_kernel, false, true)->Apply(GroupedOptions);
BENCHMARK_CAPTURE(Grouped, gmm_builtin, false, false)->Apply(GroupedOptions);
BENCHMARK_CAPTURE(Grouped, gmm_bf16_out_pallas_kernel, false, true, DType::kBF16)
    ->Apply(GroupedOptions);
BENCHMARK_CAPTURE(Grouped, gmm_bf16_out_builtin, false, false, DType::kBF16)
    ->Apply(GroupedOptions);
BENCHMARK_CAPTURE(Grouped, tgmm_pallas_kernel, true, true)->Apply(GroupedOptions);
BENCHMARK_CAPTURE(Grouped, tgmm_builtin, true, false)->Apply(GroupedOptions);

void EmptyGridStep(benchmark::State& state) {
  const int64_t steps = 100000;
  Runtime rt({.num_devices = 1, .num_threads = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(HostTensor(DType::kF32, {8}, std::vector<double>(8, 0)),
                        NamedSharding(mesh, P()));
  auto f = jit([](Tracer a) {
    return pl::pallas_call([](pl::Ref in, pl::Ref out) {},
                           {.out_shapes = {{DType::kF32, {8}}},
                            .grid = {steps},
                            .in_specs = {pl::BlockSpec::Any()},
                            .out_specs = {pl::BlockSpec::Any()}})(a)[0];
  });
  (void)f(x);
  for (auto _ : state) {
    absl::StatusOr<Array> out = f(x);
    benchmark::DoNotOptimize(out);
  }
  state.counters["ns/step"] =
      benchmark::Counter(static_cast<double>(steps) * state.iterations(),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(EmptyGridStep)->UseRealTime()->Unit(benchmark::kMillisecond);

void BlockedGridStep(benchmark::State& state) {
  // A copy kernel: one 8x128 f32 block per step read in place and stored into the output's
  // block in place (4 KiB each way; 8 MiB in all, within L3).
  const int64_t rows = 8 * 2000;
  Runtime rt({.num_devices = 1, .num_threads = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(*random::normal(random::key(3), {rows, 128}, DType::kF32),
                        NamedSharding(mesh, P()));
  auto f = jit([](Tracer a) {
    return pl::pallas_call([](pl::Ref in, pl::Ref out) { out.store(in.load()); },
                           {.out_shapes = {{DType::kF32, {rows, 128}}},
                            .grid = {rows / 8},
                            .in_specs = {pl::BlockSpec({8, 128},
                                                       [](pl::Idx g) {
                                                         return pl::Blocks{g[0], 0};
                                                       })},
                            .out_specs = {pl::BlockSpec({8, 128}, [](pl::Idx g) {
                              return pl::Blocks{g[0], 0};
                            })}})(a)[0];
  });
  (void)f(x);
  for (auto _ : state) {
    absl::StatusOr<Array> out = f(x);
    benchmark::DoNotOptimize(out);
  }
  state.counters["ns/step"] =
      benchmark::Counter(static_cast<double>(rows / 8) * state.iterations(),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["GB/s"] = benchmark::Counter(2.0 * rows * 128 * 4 * state.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
}
BENCHMARK(BlockedGridStep)->UseRealTime()->Unit(benchmark::kMillisecond);

void CompileSeedKernel(benchmark::State& state) {
  Runtime rt({.num_devices = 1, .num_threads = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(*random::normal(random::key(1), {128, 128}, DType::kBF16),
                        NamedSharding(mesh, P()));
  for (auto _ : state) {
    auto f =
        jit([](Tracer a, Tracer b) { return examples::BlockedMatmul(128, 128, 128)(a, b)[0]; });
    absl::StatusOr<Array> out = f(x, x);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      return;
    }
  }
}
BENCHMARK(CompileSeedKernel)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardjit

BENCHMARK_MAIN();
