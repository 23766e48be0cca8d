// Embedding lookups and their gradient: gather of table rows (jnp.take(table, ids, 0)) and
// scatter_add of rows into the table (the x86 backend's row kernels and the reference ones),
// against memcpy of the same bytes, one thread; outputs in recycled memory on every side. GB/s
// counts the bytes the op must read and write: for the gather the rows read and written; for the
// scatter_add the rows read and the table rows they update, read and written (the table is updated
// in place, as when the evaluator donates it).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backends/reference/kernel.h"
#include "backends/x86/copy_kernels.h"
#include "ir/allocator.h"
#include "benchmark/benchmark.h"
#include "ir/primitive.h"
#include "ir/types.h"

namespace shardjit {
namespace {

using ir::DType;
using ir::Tensor;

constexpr int64_t kVocab = 32768, kTokens = 4096;

// Hands out one block again and again (as a device allocator that recycles freed blocks does),
// so that the kernels are timed without the page faults of fresh memory.
class RecyclingAllocator final : public ir::Allocator {
 public:
  ~RecyclingAllocator() override {
    if (block_ != nullptr) ir::FreeStorage(block_, bytes_);
  }
  void* Allocate(size_t bytes) override {
    if (block_ == nullptr || bytes != bytes_) {
      if (block_ != nullptr) ir::FreeStorage(block_, bytes_);
      block_ = ir::AllocateStorage(bytes);
      bytes_ = bytes;
    }
    return block_;
  }
  void Deallocate(void*, size_t) override {}

 private:
  void* block_ = nullptr;
  size_t bytes_ = 0;
};

Tensor Ids(int64_t seed) {
  std::mt19937 rng(seed);
  Tensor ids = Tensor::Empty({DType::kS32, {kTokens, 1}});
  for (int64_t i = 0; i < kTokens; ++i) ids.data_as<int32_t>()[i] = rng() % kVocab;
  return ids;
}

Tensor Filled(DType dtype, std::vector<int64_t> dims) {
  Tensor t = Tensor::Empty({dtype, std::move(dims)});
  std::memset(t.data(), 1, t.byte_size());
  return t;
}

ir::Op Typed(ir::Op op, const std::vector<Tensor>& operands) {
  std::vector<ir::ShapedType> types;
  for (const Tensor& t : operands) types.push_back(t.type());
  absl::StatusOr<std::vector<ir::ShapedType>> results = ir::InferResultTypes({}, types, op);
  if (!results.ok()) std::abort();
  *op.add_result_types() = ir::ToProto((*results)[0]);
  return op;
}

void GatherRows(benchmark::State& state, bool x86) {
  const int64_t dim = state.range(0);
  const Tensor table = Filled(DType::kF32, {kVocab, dim});
  const Tensor ids = Ids(1);
  ir::Op op;
  op.set_opcode("gather");
  ir::GatherAttrs* a = op.mutable_gather();
  a->add_offset_dims(1);
  a->add_collapsed_slice_dims(0);
  a->add_start_index_map(0);
  a->add_slice_sizes(1);
  a->add_slice_sizes(dim);
  a->set_mode(ir::CLIP);
  op = Typed(op, {table, ids});
  const backends::reference::Kernel kernel =
      x86 ? backends::x86::GatherRowsKernel : *backends::reference::FindKernel("gather");
  RecyclingAllocator allocator;
  for (auto _ : state) {
    absl::StatusOr<std::vector<Tensor>> out = kernel(op, {table, ids}, &allocator);
    if (!out.ok()) std::abort();
    benchmark::DoNotOptimize(out->front().data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * kTokens * dim * 4);
}

void ScatterAddRows(benchmark::State& state, bool x86) {
  const int64_t dim = state.range(0);
  const Tensor ids = Ids(2);
  const Tensor updates = Filled(DType::kF32, {kTokens, dim});
  ir::Op op;
  op.set_opcode("scatter_add");
  ir::ScatterAttrs* a = op.mutable_scatter();
  a->add_update_window_dims(1);
  a->add_inserted_window_dims(0);
  a->add_scatter_dims_to_operand_dims(0);
  a->set_mode(ir::FILL_OR_DROP);
  std::vector<Tensor> operands = {Filled(DType::kF32, {kVocab, dim}), ids, updates};
  op = Typed(op, operands);
  const backends::reference::Kernel kernel =
      x86 ? backends::x86::ScatterAddRowsKernel : *backends::reference::FindKernel("scatter_add");
  for (auto _ : state) {
    // The table is handed over (unique): the kernel adds into it in place.
    std::vector<Tensor> in = {std::move(operands[0]), ids, updates};
    absl::StatusOr<std::vector<Tensor>> out = kernel(op, in, nullptr);
    if (!out.ok()) std::abort();
    in.clear();
    operands[0] = std::move(out->front());
  }
  state.SetBytesProcessed(state.iterations() * 3 * kTokens * dim * 4);
}
void BM_ScatterAddRows(benchmark::State& state) { ScatterAddRows(state, true); }
void BM_ScatterAddRowsReference(benchmark::State& state) { ScatterAddRows(state, false); }

// BM_GatherRows's rows copied one memcpy each: the same random reads without the kernel.
void BM_MemcpyRows(benchmark::State& state) {
  const int64_t dim = state.range(0);
  const Tensor table = Filled(DType::kF32, {kVocab, dim});
  const Tensor ids = Ids(1);
  std::vector<float> dst(kTokens * dim);
  for (auto _ : state) {
    for (int64_t t = 0; t < kTokens; ++t) {
      std::memcpy(&dst[t * dim], table.data_as<float>() + ids.data_as<int32_t>()[t] * dim,
                  dim * 4);
    }
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * kTokens * dim * 4);
}

// The same bytes as BM_GatherRows: contiguous memcpy of kTokens rows.
void BM_Memcpy(benchmark::State& state) {
  const int64_t bytes = kTokens * state.range(0) * 4;
  std::vector<char> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
}

void BM_GatherRows(benchmark::State& state) { GatherRows(state, true); }
void BM_GatherRowsReference(benchmark::State& state) { GatherRows(state, false); }

BENCHMARK(BM_GatherRows)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GatherRowsReference)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ScatterAddRows)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ScatterAddRowsReference)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MemcpyRows)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Memcpy)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace shardjit

BENCHMARK_MAIN();
