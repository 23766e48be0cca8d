// GEMM benchmarks of the x86 backend (bf16 and f32 inputs, f32 output; int8 inputs, int32
// output, counters["GOPS"]; 1 and 2 threads) and micro-benchmarks of this CPU's peak: loops of
// independent tdpbf16ps / vdpbf16ps / vfmadd231ps / vpdpbusd.
// Products of few rows also against weights read from memory (BM_GemmWeightsFromMemory). Every
// benchmark reports counters["GFLOPS"]. Run with
//   bazel run -c opt //bench:gemm -- --benchmark_filter=... [--benchmark_format=json]
// SHARDJIT_GEMM_BLOCKING=mc,kc,nc overrides the cache blocking (for tuning), of streaming products
// too (no StreamingPlan).
#include "backends/x86/gemm.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/gemm_internal.h"
#include "backends/x86/peak_loop.h"
#include "fmt/format.h"
#include "ir/allocator.h"
#include "ir/dtype.h"
#include "xbyak/xbyak.h"

namespace shardjit::bench {
namespace {

using backends::x86::GemmArgs;
using backends::x86::GemmType;
using backends::x86::IsaLevel;
namespace x86 = backends::x86;

// The plan override of SHARDJIT_GEMM_BLOCKING, if set.
bool BlockingOverride(int64_t* mc, int64_t* kc, int64_t* nc) {
  const char* env = std::getenv("SHARDJIT_GEMM_BLOCKING");
  if (env == nullptr) return false;
  std::vector<std::string> parts = absl::StrSplit(env, ',');
  return parts.size() == 3 && absl::SimpleAtoi(parts[0], mc) && absl::SimpleAtoi(parts[1], kc) &&
         absl::SimpleAtoi(parts[2], nc);
}

// One helper thread, as a runtime on this machine has: the 2-thread figures include waking it.
base::ThreadPool& HelperPool() {
  static base::ThreadPool pool(1);
  return pool;
}

// Runs x86::Gemm(g), with the cache blocking of SHARDJIT_GEMM_BLOCKING when it is set.
class GemmRunner {
 public:
  GemmRunner(const GemmArgs& g, IsaLevel isa) : g_(g), isa_(isa) {
    int64_t mc = 0, kc = 0, nc = 0;
    custom_ = isa != IsaLevel::kReference && BlockingOverride(&mc, &kc, &nc);
    if (!custom_) return;
    plan_ = x86::MakePlan(isa, g.type, x86::HostCaches());
    plan_.mc = mc;
    plan_.kc = kc;
    plan_.nc = nc;
    plan_.streaming_plan = false;  // these blocks (balanced), streaming or not
  }
  absl::Status operator()() const { return (*this)(g_); }
  absl::Status operator()(const GemmArgs& g) const {
    return custom_ ? x86::internal::GemmWithPlan(g, isa_, &plan_) : x86::Gemm(g);
  }

 private:
  GemmArgs g_;
  IsaLevel isa_;
  x86::GemmPlan plan_;
  bool custom_ = false;
};

// Caps the ISA for one benchmark (the level below the host's, for side-by-side figures).
class ScopedCap {
 public:
  explicit ScopedCap(IsaLevel cap) : saved_(x86::MaxIsa()) { x86::SetMaxIsa(cap); }
  ~ScopedCap() { x86::SetMaxIsa(saved_); }

 private:
  IsaLevel saved_;
};

// Times Gemm(g) at `isa`'s plan (after one untimed call, whose error skips the benchmark) and
// sets counters[`counter`] to 2 m n k per second, in billions.
void TimeGemm(benchmark::State& state, const GemmArgs& g, IsaLevel isa, const char* counter) {
  const GemmRunner run(g, isa);
  if (absl::Status s = run(); !s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  for (auto _ : state) {
    absl::Status s = run();
    benchmark::DoNotOptimize(s);
    benchmark::ClobberMemory();
  }
  state.counters[counter] = benchmark::Counter(2e-9 * g.shape.m * g.shape.n * g.shape.k,
                                               benchmark::Counter::kIsIterationInvariantRate);
}

// int8 x int8 -> int32 (uniform over the int8 range); counters["GOPS"]: 2 m n k operations.
void BM_GemmInt8(benchmark::State& state, int64_t m, int64_t k, int64_t n, int threads) {
  std::mt19937 rng(1);
  std::vector<int8_t> a(m * k), b(k * n);
  for (int8_t& x : a) x = static_cast<int8_t>(rng());
  for (int8_t& x : b) x = static_cast<int8_t>(rng());
  std::vector<int32_t> c(m * n);
  GemmArgs g;
  g.shape = {m, n, k};
  g.type = GemmType::kS8S8S32;
  g.a = a.data();
  g.b = b.data();
  g.c = c.data();
  g.parallel = {&HelperPool(), threads};
  const IsaLevel isa = x86::GemmIsaFor(g);
  if (isa == IsaLevel::kReference) {
    state.SkipWithError("int8 in plain C++ only (no AVX2 or AVX512_VNNI)");
    return;
  }
  TimeGemm(state, g, isa, "GOPS");
  // Without VNNI the operands are widened into the float GEMM (exact).
  state.SetLabel(x86::Avx512VnniUsable() ? "avx512_vnni"
                                         : fmt::format("widened, {}", x86::IsaName(isa)));
}

void BM_Gemm(benchmark::State& state, GemmType type, int64_t m, int64_t k, int64_t n, int threads,
             IsaLevel cap) {
  ScopedCap scoped_cap(cap);
  const bool bf16 = type == GemmType::kBf16Bf16F32;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a32, b32;
  std::vector<uint16_t> a16, b16;
  for (int64_t i = 0; i < m * k; ++i) {
    float v = dist(rng);
    bf16 ? a16.push_back(ir::bf16::FromFloat(v)) : a32.push_back(v);
  }
  for (int64_t i = 0; i < k * n; ++i) {
    float v = dist(rng);
    bf16 ? b16.push_back(ir::bf16::FromFloat(v)) : b32.push_back(v);
  }
  std::vector<float> c(m * n);
  GemmArgs g;
  g.shape = {m, n, k};
  g.type = type;
  g.a = bf16 ? static_cast<const void*>(a16.data()) : a32.data();
  g.b = bf16 ? static_cast<const void*>(b16.data()) : b32.data();
  g.c = c.data();
  g.parallel = {&HelperPool(), threads};

  const IsaLevel isa = x86::GemmIsaFor(g);
  TimeGemm(state, g, isa, "GFLOPS");
  state.SetLabel(std::string(x86::IsaName(isa)));
}

// The f64 GEMM (AVX2 FMA kernel, or the AVX-512 one): counters["GFLOPS"].
void BM_GemmF64(benchmark::State& state, int64_t m, int64_t k, int64_t n, int threads) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> a(m * k), b(k * n), c(m * n);
  for (double& v : a) v = dist(rng);
  for (double& v : b) v = dist(rng);
  GemmArgs g;
  g.shape = {m, n, k};
  g.type = GemmType::kF64F64F64;
  g.a = a.data();
  g.b = b.data();
  g.c = c.data();
  g.parallel = {&HelperPool(), threads};
  const IsaLevel isa = x86::GemmIsaFor(g);
  TimeGemm(state, g, isa, "GFLOPS");
  state.SetLabel(std::string(x86::IsaName(isa)));
}

// Few rows against weights read from memory: each iteration multiplies the same m x k rows by
// the next of 64 different k x n matrices (256 MiB of f32, on huge pages as a device allocator
// gives them), as a grouped matmul's small groups do, on `threads` threads.
void BM_GemmWeightsFromMemory(benchmark::State& state, GemmType type, int64_t m, int64_t k,
                              int64_t n, int threads) {
  constexpr int64_t kMatrices = 64;
  const bool bf16 = type == GemmType::kBf16Bf16F32;
  const size_t elem = bf16 ? 2 : 4;
  const size_t b_bytes = static_cast<size_t>(k * n) * elem;
  const size_t all_bytes = b_bytes * kMatrices;
  auto* b = static_cast<char*>(ir::AllocateStorage(all_bytes));
  if (b == nullptr) {
    state.SkipWithError("cannot allocate the weights");
    return;
  }
  std::vector<float> a(m * k, 0.5f), c(m * n);
  std::vector<uint16_t> a16(m * k, ir::bf16::FromFloat(0.5f));
  for (size_t i = 0; i < all_bytes / elem; ++i) {
    const float v = static_cast<float>(i % 7) * 0.25f;
    if (bf16) {
      reinterpret_cast<uint16_t*>(b)[i] = ir::bf16::FromFloat(v);
    } else {
      reinterpret_cast<float*>(b)[i] = v;
    }
  }
  GemmArgs g;
  g.shape = {m, n, k};
  g.type = type;
  g.a = bf16 ? static_cast<const void*>(a16.data()) : a.data();
  g.c = c.data();
  g.b = b;
  g.parallel = {&HelperPool(), threads};
  const GemmRunner run(g, x86::GemmIsaFor(g));
  if (absl::Status s = run(g); !s.ok()) {
    ir::FreeStorage(b, all_bytes);
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  int64_t next = 0;
  for (auto _ : state) {
    g.b = b + (next++ % kMatrices) * b_bytes;
    absl::Status s = run(g);
    benchmark::DoNotOptimize(s);
    benchmark::ClobberMemory();
  }
  ir::FreeStorage(b, all_bytes);
  state.counters["GFLOPS"] =
      benchmark::Counter(2e-9 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
}

using x86::PeakLoop;

void BM_Peak(benchmark::State& state, PeakLoop::Kind kind, IsaLevel needs, int accumulators,
             double flops_per_instruction) {
  if (x86::DetectedIsa() < needs) {
    state.SkipWithError(fmt::format("needs {}", x86::IsaName(needs)).c_str());
    return;
  }
  if (kind == PeakLoop::Kind::kVpdpbusdZmm && !x86::DetectedAvx512Vnni()) {
    state.SkipWithError("needs AVX512_VNNI");
    return;
  }
  PeakLoop code(kind, accumulators);
  constexpr int64_t kIters = 1 << 16;
  for (auto _ : state) code.Run(kIters);
  state.counters["GFLOPS"] =
      benchmark::Counter(1e-9 * kIters * accumulators * flops_per_instruction,
                         benchmark::Counter::kIsIterationInvariantRate);
}

struct Shape {
  int64_t m, k, n;
};

void RegisterAll() {
  using Kind = PeakLoop::Kind;
  // vdpbf16ps zmm: 16 lanes x 2 products x 2 flops; vfmadd231ps zmm: 16 x 2; ymm: 8 x 2.
  benchmark::RegisterBenchmark("BM_Peak/tdpbf16ps_tiles/acc:4", BM_Peak, Kind::kAmxTdpbf16,
                               IsaLevel::kAmxBf16, 4, 16.0 * 16 * 32 * 2);
  benchmark::RegisterBenchmark("BM_Peak/vdpbf16ps_zmm/acc:24", BM_Peak, Kind::kDpbf16Zmm,
                               IsaLevel::kAvx512Bf16, 24, 64.0);
  benchmark::RegisterBenchmark("BM_Peak/vfmadd231ps_zmm/acc:24", BM_Peak, Kind::kFmaZmm,
                               IsaLevel::kAvx512, 24, 32.0);
  benchmark::RegisterBenchmark("BM_Peak/vfmadd231ps_ymm/acc:12", BM_Peak, Kind::kFmaYmm,
                               IsaLevel::kAvx2, 12, 16.0);
  // vpdpbusd zmm: 16 lanes x 4 products x 2 integer operations (the GFLOPS counter counts them).
  benchmark::RegisterBenchmark("BM_Peak/vpdpbusd_zmm/acc:24", BM_Peak, Kind::kVpdpbusdZmm,
                               IsaLevel::kAvx512, 24, 128.0);
  const Shape shapes[] = {{128, 128, 128},    {256, 256, 256},    {512, 512, 512},
                          {1024, 1024, 1024}, {2048, 2048, 1024}, {1024, 2048, 1024},
                          {1000, 1000, 1000}, {777, 1234, 555},
                          // Few rows (streaming B; its 4 MiB stay in L3 between calls).
                          {1, 1024, 1024},    {6, 1024, 1024},    {13, 1024, 1024},
                          {20, 1024, 1024},   {41, 1024, 1024}};
  // bf16 also below AMX where the host has it: the AVX-512 kernels side by side.
  const bool amx = x86::ActiveIsa() >= IsaLevel::kAmxBf16;
  for (GemmType type : {GemmType::kBf16Bf16F32, GemmType::kF32F32F32}) {
    const bool bf16 = type == GemmType::kBf16Bf16F32;
    for (const Shape& s : shapes) {
      for (int threads : {1, 2}) {
        for (IsaLevel cap : {x86::MaxIsa(), IsaLevel::kAvx512Bf16}) {
          if (cap != x86::MaxIsa() && !(bf16 && amx)) continue;
          std::string name = fmt::format("BM_Gemm/{}/M:{}/K:{}/N:{}/threads:{}{}",
                                         bf16 ? "bf16" : "f32", s.m, s.k, s.n, threads,
                                         cap != x86::MaxIsa() ? "/cap:avx512_bf16" : "");
          benchmark::RegisterBenchmark(name.c_str(), BM_Gemm, type, s.m, s.k, s.n, threads, cap)
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
    if (bf16) {  // once: the int8 and f64 products over the same shapes
      for (const Shape& s : shapes) {
        for (int threads : {1, 2}) {
          std::string name =
              fmt::format("BM_Gemm/f64/M:{}/K:{}/N:{}/threads:{}", s.m, s.k, s.n, threads);
          benchmark::RegisterBenchmark(name.c_str(), BM_GemmF64, s.m, s.k, s.n, threads)
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
      }
      for (const Shape& s : shapes) {
        for (int threads : {1, 2}) {
          std::string name =
              fmt::format("BM_Gemm/s8/M:{}/K:{}/N:{}/threads:{}", s.m, s.k, s.n, threads);
          benchmark::RegisterBenchmark(name.c_str(), BM_GemmInt8, s.m, s.k, s.n, threads)
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
    for (int64_t m : {1, 6, 12, 13, 20, 27, 41, 64, 96}) {
      for (int threads : {1, 2}) {
        const std::string name =
            fmt::format("BM_GemmWeightsFromMemory/{}/M:{}/K:1024/N:1024/threads:{}",
                        bf16 ? "bf16" : "f32", m, threads);
        benchmark::RegisterBenchmark(name.c_str(), BM_GemmWeightsFromMemory, type, m, 1024, 1024,
                                     threads)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

}  // namespace
}  // namespace shardjit::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  shardjit::bench::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
