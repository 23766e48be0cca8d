// Fused elementwise loops, unfused (the reference kernels op by op on whole tensors) vs one loop
// generated for the active ISA: the MLP tail bf16(max(x*w+b, 0)), SiLU x*logistic(x), the tanh
// approximation of GELU, the exact (erf) GELU and a rotary embedding's x cos(t) - y sin(t) over n
// f32 elements; and the psum reduction step
// (ReduceBuffers).
// GB/s counts the bytes the fused loop must move (inputs + output).
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

// The fusion op of a one-op module with `params` -> fusion; `N` in the text is the size.
ir::Op Fusion(const std::string& params, const std::string& fusion_line, int64_t n) {
  std::string text = absl::StrReplaceAll(
      "module m [view=per_device mesh={x:1} devices=(0) entry=main]\n"
      "func main = { lambda ; " + params + ". let\n    " + fusion_line + "\n  in (z) }\n",
      {{"N", std::to_string(n)}});
  return ir::ParseModule(text)->functions(0).body().ops(0);
}

ir::Op MlpTail(int64_t n) {
  return Fusion(
      "a:f32[N] b:f32[N] c:f32[N] d:f32[]",
      "z:bf16[N] = fusion[body={ lambda ; e:f32[N] f:f32[N] g:f32[N] h:f32[]. let "
      "i:f32[N] = mul e f j:f32[N] = add i g k:f32[N] = broadcast_in_dim[shape=(N)] h "
      "l:f32[N] = max j k m:bf16[N] = convert_element_type[new_dtype=bf16] l in (m) }] a b c d",
      n);
}

// x * logistic(x).
ir::Op Silu(int64_t n) {
  return Fusion("a:f32[N]",
                "z:f32[N] = fusion[body={ lambda ; b:f32[N]. let c:f32[N] = logistic b "
                "d:f32[N] = mul b c in (d) }] a",
                n);
}

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); the constants are scalar operands.
ir::Op GeluTanh(int64_t n) {
  return Fusion(
      "a:f32[N] b:f32[] c:f32[] d:f32[] e:f32[]",
      "z:f32[N] = fusion[body={ lambda ; f:f32[N] g:f32[] h:f32[] i:f32[] j:f32[]. let "
      "k:f32[N] = broadcast_in_dim[shape=(N)] g l:f32[N] = broadcast_in_dim[shape=(N)] h "
      "m:f32[N] = broadcast_in_dim[shape=(N)] i o:f32[N] = broadcast_in_dim[shape=(N)] j "
      "p:f32[N] = mul f f q:f32[N] = mul p f r:f32[N] = mul l q s:f32[N] = add f r "
      "t:f32[N] = mul k s u:f32[N] = tanh t v:f32[N] = add o u w:f32[N] = mul f v "
      "x:f32[N] = mul m w in (x) }] a b c d e",
      n);
}

// The exact GELU, 0.5 x (1 + erf(x / sqrt(2))); the constants are scalar operands.
ir::Op GeluErf(int64_t n) {
  return Fusion(
      "a:f32[N] b:f32[] c:f32[] d:f32[]",
      "z:f32[N] = fusion[body={ lambda ; e:f32[N] f:f32[] g:f32[] h:f32[]. let "
      "i:f32[N] = broadcast_in_dim[shape=(N)] f j:f32[N] = broadcast_in_dim[shape=(N)] g "
      "k:f32[N] = broadcast_in_dim[shape=(N)] h l:f32[N] = mul e i m:f32[N] = erf l "
      "o:f32[N] = add j m p:f32[N] = mul e o q:f32[N] = mul k p in (q) }] a b c d",
      n);
}

// A rotary embedding's rotation, x cos(t) - y sin(t), of angles t.
ir::Op Rotation(int64_t n) {
  return Fusion(
      "a:f32[N] b:f32[N] c:f32[N]",
      "z:f32[N] = fusion[body={ lambda ; d:f32[N] e:f32[N] f:f32[N]. let "
      "g:f32[N] = cos f h:f32[N] = sin f i:f32[N] = mul d g j:f32[N] = mul e h "
      "k:f32[N] = sub i j in (k) }] a b c",
      n);
}

// `arrays` f32 arrays of n values in [-50, 50], then `scalars`.
std::vector<ir::Tensor> Inputs(int64_t n, int arrays = 3, std::vector<double> scalars = {0.0}) {
  std::vector<ir::Tensor> in;
  for (int i = 0; i < arrays; ++i) {
    ir::Tensor t = ir::Tensor::Empty({ir::DType::kF32, {n}});
    float* p = t.data_as<float>();
    for (int64_t j = 0; j < n; ++j) p[j] = static_cast<float>((j * (i + 3)) % 101) - 50.0f;
    in.push_back(t);
  }
  for (double s : scalars) in.push_back(ir::Tensor::FromDoubles({ir::DType::kF32, {}}, {s}));
  return in;
}

const std::vector<double> kGeluConstants = {0.7978845608028654, 0.044715, 0.5, 1.0};
const std::vector<double> kGeluErfConstants = {0.7071067811865476, 1.0, 0.5};

void SetCounters(benchmark::State& state, int64_t bytes_per_run) {
  state.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(bytes_per_run) * state.iterations(), benchmark::Counter::kIsRate);
}

// The reference kernels op by op on whole tensors.
void RunUnfused(benchmark::State& state, const ir::Op& op, const std::vector<ir::Tensor>& in,
                int64_t bytes) {
  const backends::reference::Kernel* kernel = backends::reference::FindKernel("fusion");
  for (auto _ : state) {
    auto out = (*kernel)(op, in, ir::HostAllocator());
    benchmark::DoNotOptimize(out);
  }
  SetCounters(state, bytes);
}

// One generated loop for the active ISA.
void RunFused(benchmark::State& state, const ir::Op& op, const std::vector<ir::Tensor>& in,
              int64_t bytes) {
  if (backends::x86::ActiveIsa() < backends::x86::IsaLevel::kAvx2) {
    state.SkipWithError("no AVX2");
    return;
  }
  state.SetLabel(std::string(backends::x86::IsaName(backends::x86::ActiveIsa())));
  for (auto _ : state) {
    auto out = backends::x86::FusionKernel(op, in, ir::HostAllocator());
    benchmark::DoNotOptimize(out);
  }
  SetCounters(state, bytes);
}

void BM_MlpTailUnfusedReference(benchmark::State& state) {
  const int64_t n = state.range(0);
  RunUnfused(state, MlpTail(n), Inputs(n), n * (3 * 4 + 2));
}

void BM_MlpTailFused(benchmark::State& state) {
  const int64_t n = state.range(0);
  RunFused(state, MlpTail(n), Inputs(n), n * (3 * 4 + 2));
}

void BM_SiluUnfusedReference(benchmark::State& state) {
  const int64_t n = state.range(0);
  RunUnfused(state, Silu(n), Inputs(n, 1, {}), n * 8);
}

void BM_SiluFused(benchmark::State& state) {
  const int64_t n = state.range(0);
  RunFused(state, Silu(n), Inputs(n, 1, {}), n * 8);
}

void BM_GeluTanhUnfusedReference(benchmark::State& state) {
  const int64_t n = state.range(0);
  RunUnfused(state, GeluTanh(n), Inputs(n, 1, kGeluConstants), n * 8);
}

void BM_GeluTanhFused(benchmark::State& state) {
  const int64_t n = state.range(0);
  RunFused(state, GeluTanh(n), Inputs(n, 1, kGeluConstants), n * 8);
}

void BM_GeluErfUnfusedReference(benchmark::State& state) {
  const int64_t n = state.range(0);
  RunUnfused(state, GeluErf(n), Inputs(n, 1, kGeluErfConstants), n * 8);
}

void BM_GeluErfFused(benchmark::State& state) {
  const int64_t n = state.range(0);
  RunFused(state, GeluErf(n), Inputs(n, 1, kGeluErfConstants), n * 8);
}

void BM_RotationUnfusedReference(benchmark::State& state) {
  const int64_t n = state.range(0);
  RunUnfused(state, Rotation(n), Inputs(n, 3, {}), n * 16);
}

void BM_RotationFused(benchmark::State& state) {
  const int64_t n = state.range(0);
  RunFused(state, Rotation(n), Inputs(n, 3, {}), n * 16);
}

void BM_ReduceBuffersSumF32(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<ir::Tensor> in = Inputs(n);
  for (auto _ : state) {
    auto s = backends::x86::ReduceBuffers(backends::ReduceKind::kSum, ir::DType::kF32,
                                          in[0].data(), in[1].data(), in[2].data(), n);
    benchmark::DoNotOptimize(s);
  }
  SetCounters(state, n * 3 * 4);
}

BENCHMARK(BM_MlpTailUnfusedReference)->Arg(1 << 20)->Arg(4 << 20)->Arg(16 << 20)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MlpTailFused)->Arg(1 << 20)->Arg(4 << 20)->Arg(16 << 20)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SiluUnfusedReference)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SiluFused)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GeluTanhUnfusedReference)->Arg(1 << 20)->Arg(16 << 20)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GeluTanhFused)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GeluErfUnfusedReference)->Arg(1 << 20)->Arg(16 << 20)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GeluErfFused)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RotationUnfusedReference)->Arg(1 << 20)->Arg(16 << 20)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RotationFused)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReduceBuffersSumF32)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardjit

BENCHMARK_MAIN();
