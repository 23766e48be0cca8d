#include "bench/full_gemm.h"

#include <string>
#include <vector>

#include "backends/x86/gemm.h"
#include "base/thread_pool.h"
#include "fmt/format.h"
#include "frontend/random.h"

namespace shardjit::bench {

void BM_FullGemm(benchmark::State& state, int64_t m, int64_t k, int64_t n) {
  const int cores = base::AvailableCores();
  static base::ThreadPool pool(cores - 1);
  ir::Tensor x = *random::normal(random::key(1), {m, k}, DType::kBF16);
  ir::Tensor w = *random::normal(random::key(2), {k, n}, DType::kBF16);
  std::vector<float> out(m * n);
  backends::x86::GemmArgs g;
  g.shape = {m, n, k};
  g.type = backends::x86::GemmType::kBf16Bf16F32;
  g.a = x.data();
  g.b = w.data();
  g.c = out.data();
  g.parallel = {&pool, cores};
  for (auto _ : state) {
    if (absl::Status s = backends::x86::Gemm(g); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(2e-9 * m * k * n,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(fmt::format("one bf16 GEMM of the whole product, {} threads", cores));
}

}  // namespace shardjit::bench
