// Peer GEMMs for side-by-side ratios with //bench:gemm's figures: oneDNN's matmul (bf16 and f32
// inputs, f32 output; s8 inputs, s32 output) and OpenBLAS cblas_sgemm and cblas_dgemm, on the
// same shapes and thread counts. Linked
// into //bench:gemm_with_peers only (scripts/bench.sh installs the libraries and sets
// OPENBLAS_CORETYPE=SKYLAKEX on AVX-512 hosts, where OpenBLAS otherwise detects Haswell).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "ir/dtype.h"
#include "oneapi/dnnl/dnnl.hpp"

extern "C" void omp_set_num_threads(int);  // oneDNN's OpenMP runtime (libgomp)
extern "C" void openblas_set_num_threads(int);

namespace shardjit::bench {
namespace {

std::vector<float> RandomFloats(int64_t n, int seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void SetFlops(benchmark::State& state, int64_t m, int64_t k, int64_t n) {
  state.counters["GFLOPS"] = benchmark::Counter(2e-9 * m * k * n,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void BM_OneDnn(benchmark::State& state, bool bf16, int64_t m, int64_t k, int64_t n, int threads) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  omp_set_num_threads(threads);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const dt in = bf16 ? dt::bf16 : dt::f32;
  dnnl::memory::desc a_md({m, k}, in, tag::ab), b_md({k, n}, in, tag::ab);
  dnnl::memory::desc c_md({m, n}, dt::f32, tag::ab);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), engine);
  } catch (const dnnl::error& e) {  // e.g. bf16 on a CPU without AVX-512
    state.SkipWithError(fmt::format("oneDNN has no matmul for this CPU: {}", e.what()).c_str());
    return;
  }
  dnnl::matmul matmul(pd);
  std::vector<float> a32 = RandomFloats(m * k, 1), b32 = RandomFloats(k * n, 2), c(m * n);
  std::vector<uint16_t> a16, b16;
  for (float v : a32) a16.push_back(ir::bf16::FromFloat(v));
  for (float v : b32) b16.push_back(ir::bf16::FromFloat(v));
  dnnl::memory a(a_md, engine, bf16 ? static_cast<void*>(a16.data()) : a32.data());
  dnnl::memory b(b_md, engine, bf16 ? static_cast<void*>(b16.data()) : b32.data());
  dnnl::memory cm(c_md, engine, c.data());
  for (auto _ : state) {
    matmul.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, cm}});
    stream.wait();
  }
  SetFlops(state, m, k, n);
}

// oneDNN's int8 matmul: s8 x s8 -> s32, as //bench:gemm's BM_Gemm/s8 (counters["GOPS"]).
void BM_OneDnnInt8(benchmark::State& state, int64_t m, int64_t k, int64_t n, int threads) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  omp_set_num_threads(threads);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  dnnl::memory::desc a_md({m, k}, dt::s8, tag::ab), b_md({k, n}, dt::s8, tag::ab);
  dnnl::memory::desc c_md({m, n}, dt::s32, tag::ab);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), engine);
  } catch (const dnnl::error& e) {
    state.SkipWithError(fmt::format("oneDNN has no int8 matmul here: {}", e.what()).c_str());
    return;
  }
  dnnl::matmul matmul(pd);
  std::mt19937 rng(1);
  std::vector<int8_t> a8(m * k), b8(k * n);
  for (int8_t& x : a8) x = static_cast<int8_t>(rng());
  for (int8_t& x : b8) x = static_cast<int8_t>(rng());
  std::vector<int32_t> c(m * n);
  dnnl::memory a(a_md, engine, a8.data()), b(b_md, engine, b8.data()), cm(c_md, engine, c.data());
  for (auto _ : state) {
    matmul.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, cm}});
    stream.wait();
  }
  state.counters["GOPS"] =
      benchmark::Counter(2e-9 * m * k * n, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(pd.impl_info_str());
}

void BM_OpenBlas(benchmark::State& state, int64_t m, int64_t k, int64_t n, int threads) {
  openblas_set_num_threads(threads);
  std::vector<float> a = RandomFloats(m * k, 1), b = RandomFloats(k * n, 2), c(m * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(),
                n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  SetFlops(state, m, k, n);
}

void BM_OpenBlasF64(benchmark::State& state, int64_t m, int64_t k, int64_t n, int threads) {
  openblas_set_num_threads(threads);
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> a(m * k), b(k * n), c(m * n);
  for (double& x : a) x = dist(rng);
  for (double& x : b) x = dist(rng);
  for (auto _ : state) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a.data(), k, b.data(),
                n, 0.0, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  SetFlops(state, m, k, n);
}

const bool registered = [] {
  struct Shape {
    int64_t m, k, n;
  };
  const Shape shapes[] = {{128, 128, 128},    {256, 256, 256},    {512, 512, 512},
                          {1024, 1024, 1024}, {2048, 2048, 1024}, {1024, 2048, 1024},
                          {1000, 1000, 1000}, {777, 1234, 555}};
  for (const Shape& s : shapes) {
    for (int threads : {1, 2}) {
      for (bool bf16 : {true, false}) {
        std::string name = fmt::format("BM_OneDnn/{}/M:{}/K:{}/N:{}/threads:{}",
                                       bf16 ? "bf16" : "f32", s.m, s.k, s.n, threads);
        benchmark::RegisterBenchmark(name.c_str(), BM_OneDnn, bf16, s.m, s.k, s.n, threads)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
      std::string int8_name =
          fmt::format("BM_OneDnn/s8/M:{}/K:{}/N:{}/threads:{}", s.m, s.k, s.n, threads);
      benchmark::RegisterBenchmark(int8_name.c_str(), BM_OneDnnInt8, s.m, s.k, s.n, threads)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      std::string name =
          fmt::format("BM_OpenBlas/f32/M:{}/K:{}/N:{}/threads:{}", s.m, s.k, s.n, threads);
      benchmark::RegisterBenchmark(name.c_str(), BM_OpenBlas, s.m, s.k, s.n, threads)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      std::string f64_name =
          fmt::format("BM_OpenBlas/f64/M:{}/K:{}/N:{}/threads:{}", s.m, s.k, s.n, threads);
      benchmark::RegisterBenchmark(f64_name.c_str(), BM_OpenBlasF64, s.m, s.k, s.n, threads)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace shardjit::bench
