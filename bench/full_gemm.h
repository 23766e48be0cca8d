// The yardstick of the distributed benchmarks: one bf16 x bf16 -> f32 GEMM of the whole product
// on every core (the calling thread plus the helpers of a thread pool).
#ifndef SHARDJIT_BENCH_FULL_GEMM_H_
#define SHARDJIT_BENCH_FULL_GEMM_H_

#include <cstdint>

#include "benchmark/benchmark.h"

namespace shardjit::bench {

// Counter GFLOPS: 2*m*k*n per iteration.
void BM_FullGemm(benchmark::State& state, int64_t m, int64_t k, int64_t n);

}  // namespace shardjit::bench

#endif  // SHARDJIT_BENCH_FULL_GEMM_H_
