#include "backends/x86/host_rates.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/x86/gemm.h"
#include "ir/dtype.h"

namespace shardjit::backends::x86 {
namespace {

// Seconds of the fastest of `runs` calls of `f`, after one unmeasured call.
template <typename F>
double BestSeconds(int runs, F f) {
  f();
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return std::max(best, 1e-9);
}

HostRates Measure() {
  HostRates rates;
  constexpr int64_t kN = 256;
  std::vector<uint16_t> a(kN * kN, ir::bf16::FromFloat(0.5f));
  std::vector<uint16_t> b(kN * kN, ir::bf16::FromFloat(2.0f));
  std::vector<float> c(kN * kN);
  GemmArgs g;
  g.shape = {kN, kN, kN};
  g.type = GemmType::kBf16Bf16F32;
  g.a = a.data();
  g.b = b.data();
  g.c = c.data();
  bool ok = true;
  const double gemm = BestSeconds(5, [&] { ok = ok && Gemm(g).ok(); });
  rates.gemm_flops_per_second = ok ? 2.0 * kN * kN * kN / gemm : 0;
  constexpr size_t kBytes = size_t{4} << 20;
  std::vector<char> from(kBytes, 1), to(kBytes);
  const double copy = BestSeconds(3, [&] { std::memcpy(to.data(), from.data(), kBytes); });
  rates.copy_bytes_per_second = kBytes / copy;
  return rates;
}

}  // namespace

const HostRates& MeasuredHostRates() {
  static const HostRates rates = Measure();
  return rates;
}

}  // namespace shardjit::backends::x86
