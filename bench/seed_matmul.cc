// The seed variants (examples/seed_variants.h) on the x86 backend vs the reference backend, on a
// 2x2 mesh, side by side in one run with the yardstick they are held to: one bf16 GEMM of the
// whole product on every core (`full_gemm`). Counters: GFLOPS of the whole 2*M*K*N product.
//
//   bazel run -c opt //bench:seed_matmul -- --benchmark_filter=... [--benchmark_format=json]
#include <map>
#include <memory>
#include <string>

#include "backends/x86/gemm.h"
#include "base/thread_pool.h"
#include "bench/full_gemm.h"
#include "benchmark/benchmark.h"
#include "examples/seed_variants.h"
#include "fmt/format.h"

namespace shardjit {
namespace {

constexpr int64_t kM = 2048, kK = 2048, kN = 1024;

// Inputs and compiled variants shared by every benchmark of one backend.
struct Fixture {
  Runtime rt{{.num_devices = 4}};
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  Array x = *device_put(*random::normal(random::key(1), {kM, kK}, DType::kBF16),
                        NamedSharding(mesh, P("x", "y")));
  Array w = *device_put(*random::normal(random::key(2), {kK, kN}, DType::kBF16),
                        NamedSharding(mesh, P("x", None)));
  std::vector<examples::SeedVariant> variants;
};

Fixture& Get(Backend backend) {
  static auto* fixtures = new std::map<Backend, std::unique_ptr<Fixture>>();
  std::unique_ptr<Fixture>& f = (*fixtures)[backend];
  if (!f) {
    f = std::make_unique<Fixture>();
    f->variants = examples::SeedVariants(f->mesh, kK, backend);
  }
  return *f;
}

// The whole product as one GEMM (bf16 x bf16 -> f32) on the calling thread plus helpers.
void BM_SeedVariant(benchmark::State& state, Backend backend, int index) {
  Fixture& f = Get(backend);
  examples::SeedVariant& v = f.variants[index];
  if (!v.program(f.x, f.w).ok()) {
    state.SkipWithError("variant failed");
    return;
  }
  for (auto _ : state) {
    absl::StatusOr<Array> out = v.program(f.x, f.w);
    benchmark::DoNotOptimize(out);
  }
  state.counters["GFLOPS"] = benchmark::Counter(2e-9 * kM * kK * kN,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(v.description);
}

const bool registered = [] {
  benchmark::RegisterBenchmark(
      "full_gemm", [](benchmark::State& s) { bench::BM_FullGemm(s, kM, kK, kN); })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->MinTime(1.0);
  for (auto [backend, name] : {std::pair{Backend::kX86, "x86"},
                               std::pair{Backend::kReference, "reference"}}) {
    for (int i = 0; i < 5; ++i) {
      std::string label = std::string("seed_") + static_cast<char>('a' + i) + "/" + name;
      benchmark::RegisterBenchmark(label.c_str(), BM_SeedVariant, backend, i)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(1.0);
    }
  }
  return true;
}();

}  // namespace
}  // namespace shardjit

BENCHMARK_MAIN();
