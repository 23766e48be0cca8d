// dot_general [n, n] x [n, n] by dtype: the x86 kernel for f32, bf16, f16 (widened into the
// f32 GEMM), s8 -> s32 (the VNNI int8 GEMM, where the CPU has it) and f64 (the f64 GEMM) beside
// the reference kernel for s8 -> s32, f16 and f64. GFLOP/s counts 2 n^3 (integer operations for
// s8).
#include <string>

#include "backends/reference/kernel.h"
#include "backends/x86/dot_general.h"
#include "benchmark/benchmark.h"
#include "ir/primitive.h"
#include "ir/types.h"

namespace shardjit {
namespace {

void Run(benchmark::State& state, bool x86, ir::DType in, ir::DType out) {
  const int64_t n = state.range(0);
  ir::Op op;
  op.set_opcode("dot_general");
  op.mutable_dot_general()->add_lhs_contracting_dims(1);
  op.mutable_dot_general()->add_rhs_contracting_dims(0);
  op.mutable_dot_general()->set_preferred_element_type(ir::ToProto(out));
  *op.add_result_types() = ir::ToProto(ir::ShapedType{out, {n, n}});
  ir::Tensor a = ir::Tensor::Zeros({in, {n, n}}), b = ir::Tensor::Zeros({in, {n, n}});
  const backends::reference::Kernel& ref = *backends::reference::FindKernel("dot_general");
  for (auto _ : state) {
    auto c = x86 ? backends::x86::DotGeneral(op, {a, b}, ir::HostAllocator())
                 : ref(op, {a, b}, ir::HostAllocator());
    if (!c.ok()) state.SkipWithError(std::string(c.status().message()).c_str());
    benchmark::DoNotOptimize(c);
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(Run, x86_f32, true, ir::DType::kF32, ir::DType::kF32)->Arg(512)->UseRealTime();
BENCHMARK_CAPTURE(Run, x86_bf16_f32, true, ir::DType::kBF16, ir::DType::kF32)
    ->Arg(512)
    ->UseRealTime();
BENCHMARK_CAPTURE(Run, x86_f16, true, ir::DType::kF16, ir::DType::kF16)->Arg(512)->UseRealTime();
BENCHMARK_CAPTURE(Run, reference_f16, false, ir::DType::kF16, ir::DType::kF16)
    ->Arg(512)
    ->UseRealTime();
BENCHMARK_CAPTURE(Run, x86_s8_s32, true, ir::DType::kS8, ir::DType::kS32)
    ->Arg(512)
    ->UseRealTime();
BENCHMARK_CAPTURE(Run, reference_s8_s32, false, ir::DType::kS8, ir::DType::kS32)
    ->Arg(512)
    ->UseRealTime();
BENCHMARK_CAPTURE(Run, x86_f64, true, ir::DType::kF64, ir::DType::kF64)->Arg(512)->UseRealTime();
BENCHMARK_CAPTURE(Run, reference_f64, false, ir::DType::kF64, ir::DType::kF64)
    ->Arg(512)
    ->UseRealTime();

}  // namespace
}  // namespace shardjit

BENCHMARK_MAIN();
