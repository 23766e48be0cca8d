// Transpose throughput: the reference kernel (strided gather per output row) vs the x86
// cache-blocked kernel, for a 2-D [n, n] transpose and a [b, n, n] -> [b, n, n] swap of the two
// innermost dims. GB/s counts bytes read plus bytes written.
#include <vector>

#include "backends/reference/kernel.h"
#include "backends/x86/transpose.h"
#include "benchmark/benchmark.h"
#include "ir/types.h"

namespace shardjit {
namespace {

ir::Op TransposeOp(const ir::ShapedType& in, const std::vector<int64_t>& perm) {
  ir::Op op;
  op.set_opcode("transpose");
  std::vector<int64_t> dims;
  for (int64_t p : perm) {
    op.mutable_transpose()->add_permutation(p);
    dims.push_back(in.dims[p]);
  }
  *op.add_result_types() = ir::ToProto(ir::ShapedType{in.dtype, dims});
  return op;
}

void Run(benchmark::State& state, bool x86, ir::DType dtype, bool batched) {
  const int64_t n = state.range(0);
  ir::ShapedType type{dtype, batched ? std::vector<int64_t>{4, n, n} : std::vector<int64_t>{n, n}};
  std::vector<int64_t> perm = batched ? std::vector<int64_t>{0, 2, 1} : std::vector<int64_t>{1, 0};
  ir::Tensor x = ir::Tensor::Zeros(type);
  ir::Op op = TransposeOp(type, perm);
  const backends::reference::Kernel& ref = *backends::reference::FindKernel("transpose");
  for (auto _ : state) {
    auto out = x86 ? backends::x86::TransposeKernel(op, {x}, ir::HostAllocator())
                   : ref(op, {x}, ir::HostAllocator());
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(state.iterations() * 2 * type.byte_size());
}

void BM_ReferenceF32(benchmark::State& s) { Run(s, false, ir::DType::kF32, false); }
void BM_X86F32(benchmark::State& s) { Run(s, true, ir::DType::kF32, false); }
void BM_ReferenceBF16(benchmark::State& s) { Run(s, false, ir::DType::kBF16, false); }
void BM_X86BF16(benchmark::State& s) { Run(s, true, ir::DType::kBF16, false); }
void BM_ReferenceF32Batched(benchmark::State& s) { Run(s, false, ir::DType::kF32, true); }
void BM_X86F32Batched(benchmark::State& s) { Run(s, true, ir::DType::kF32, true); }

BENCHMARK(BM_ReferenceF32)->Arg(255)->Arg(1024)->Arg(2048)->Arg(4096);
BENCHMARK(BM_X86F32)->Arg(255)->Arg(1024)->Arg(2048)->Arg(4096);
BENCHMARK(BM_ReferenceBF16)->Arg(1024)->Arg(4096);
BENCHMARK(BM_X86BF16)->Arg(1024)->Arg(4096);
BENCHMARK(BM_ReferenceF32Batched)->Arg(1024);
BENCHMARK(BM_X86F32Batched)->Arg(1024);

}  // namespace
}  // namespace shardjit

BENCHMARK_MAIN();
