// Fused elementwise loops: the MLP tail bf16(max(x*w+b, 0)) over n f32 elements, unfused (the
// reference kernels op by op on whole tensors) vs one generated AVX2 loop; and the psum reduction
// step (ReduceBuffers). GB/s counts the bytes the fused loop must move (inputs + output).
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "backends/reference/kernel.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/elementwise.h"
#include "benchmark/benchmark.h"
#include "ir/parser.h"
#include "ir/tensor.h"

namespace shardjit {
namespace {

ir::Op MlpTail(int64_t n) {
  std::string text = absl::StrReplaceAll(
      "module m [view=per_device mesh={x:1} devices=(0) entry=main]\n"
      "func main = { lambda ; a:f32[N] b:f32[N] c:f32[N] d:f32[]. let\n"
      "    z:bf16[N] = fusion[body={ lambda ; e:f32[N] f:f32[N] g:f32[N] h:f32[]. let "
      "i:f32[N] = mul e f j:f32[N] = add i g k:f32[N] = broadcast_in_dim[shape=(N)] h "
      "l:f32[N] = max j k m:bf16[N] = convert_element_type[new_dtype=bf16] l in (m) }] a b c d\n"
      "  in (z) }\n",
      {{"N", std::to_string(n)}});
  return ir::ParseModule(text)->functions(0).body().ops(0);
}

std::vector<ir::Tensor> Inputs(int64_t n) {
  std::vector<ir::Tensor> in;
  for (int i = 0; i < 3; ++i) {
    ir::Tensor t = ir::Tensor::Empty({ir::DType::kF32, {n}});
    float* p = t.data_as<float>();
    for (int64_t j = 0; j < n; ++j) p[j] = static_cast<float>((j * (i + 3)) % 101) - 50.0f;
    in.push_back(t);
  }
  in.push_back(ir::Tensor::FromDoubles({ir::DType::kF32, {}}, {0.0}));
  return in;
}

void SetCounters(benchmark::State& state, int64_t bytes_per_run) {
  state.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(bytes_per_run) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_MlpTailUnfusedReference(benchmark::State& state) {
  const int64_t n = state.range(0);
  ir::Op op = MlpTail(n);
  std::vector<ir::Tensor> in = Inputs(n);
  const backends::reference::Kernel* kernel = backends::reference::FindKernel("fusion");
  for (auto _ : state) {
    auto out = (*kernel)(op, in, ir::HostAllocator());
    benchmark::DoNotOptimize(out);
  }
  SetCounters(state, n * (3 * 4 + 2));
}

void BM_MlpTailFusedAvx2(benchmark::State& state) {
  if (backends::x86::ActiveIsa() < backends::x86::IsaLevel::kAvx2) {
    state.SkipWithError("no AVX2");
    return;
  }
  const int64_t n = state.range(0);
  ir::Op op = MlpTail(n);
  std::vector<ir::Tensor> in = Inputs(n);
  for (auto _ : state) {
    auto out = backends::x86::FusionKernel(op, in, ir::HostAllocator());
    benchmark::DoNotOptimize(out);
  }
  SetCounters(state, n * (3 * 4 + 2));
}

void BM_ReduceBuffersSumF32(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<ir::Tensor> in = Inputs(n);
  for (auto _ : state) {
    auto s = backends::x86::ReduceBuffers(backends::x86::ReduceKind::kSum, ir::DType::kF32,
                                          in[0].data(), in[1].data(), in[2].data(), n);
    benchmark::DoNotOptimize(s);
  }
  SetCounters(state, n * 3 * 4);
}

BENCHMARK(BM_MlpTailUnfusedReference)->Arg(1 << 20)->Arg(4 << 20)->Arg(16 << 20)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MlpTailFusedAvx2)->Arg(1 << 20)->Arg(4 << 20)->Arg(16 << 20)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReduceBuffersSumF32)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardjit

BENCHMARK_MAIN();
