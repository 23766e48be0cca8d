// sort and top_k kernels (what both backends run) against std::sort-based code on the same data,
// one thread: a sort of 1M f32 and an argsort-like sort_key_val of 1M (f32 keys, s32 values);
// top_k over 64 experts for 4096 tokens (the MoE router's shape) with k = 2 and 8. Each timed
// iteration includes what the kernel must do besides ordering: copying its operand (std::sort
// sorts a copy) and writing the results.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "backends/reference/kernel.h"
#include "benchmark/benchmark.h"
#include "ir/primitive.h"
#include "ir/types.h"

namespace shardjit {
namespace {

using ir::DType;
using ir::Tensor;

std::vector<float> RandomFloats(int64_t n) {
  std::mt19937 rng(42);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor F32(const std::vector<float>& v, std::vector<int64_t> dims) {
  Tensor t = Tensor::Empty({DType::kF32, std::move(dims)});
  std::copy(v.begin(), v.end(), t.data_as<float>());
  return t;
}

// Runs the reference kernel of `op` (result types from the shape rule) on `operands`.
void RunKernel(benchmark::State& state, ir::Op op, const std::vector<Tensor>& operands) {
  std::vector<ir::ShapedType> types;
  for (const Tensor& t : operands) types.push_back(t.type());
  absl::StatusOr<std::vector<ir::ShapedType>> results = ir::InferResultTypes({}, types, op);
  if (!results.ok()) std::abort();
  for (const ir::ShapedType& t : *results) *op.add_result_types() = ir::ToProto(t);
  const backends::reference::Kernel* kernel = backends::reference::FindKernel(op.opcode());
  for (auto _ : state) {
    absl::StatusOr<std::vector<Tensor>> out = (*kernel)(op, operands, nullptr);
    if (!out.ok()) std::abort();
    benchmark::DoNotOptimize(out->front().data());
  }
}

constexpr int64_t kSortSize = 1 << 20;

ir::Op SortOp() {
  ir::Op op;
  op.set_opcode("sort");
  op.mutable_sort()->set_dimension(0);
  op.mutable_sort()->set_is_stable(true);
  op.mutable_sort()->set_num_keys(1);
  return op;
}

void BM_Sort(benchmark::State& state) {
  RunKernel(state, SortOp(), {F32(RandomFloats(kSortSize), {kSortSize})});
  state.SetItemsProcessed(state.iterations() * kSortSize);
}

void BM_StdSort(benchmark::State& state) {
  const std::vector<float> in = RandomFloats(kSortSize);
  std::vector<float> v(in.size());
  for (auto _ : state) {
    std::copy(in.begin(), in.end(), v.begin());
    std::sort(v.begin(), v.end());
    benchmark::DoNotOptimize(v.data());
  }
  state.SetItemsProcessed(state.iterations() * kSortSize);
}

void BM_SortKeyVal(benchmark::State& state) {
  Tensor values = Tensor::Empty({DType::kS32, {kSortSize}});
  std::iota(values.data_as<int32_t>(), values.data_as<int32_t>() + kSortSize, 0);
  RunKernel(state, SortOp(), {F32(RandomFloats(kSortSize), {kSortSize}), values});
  state.SetItemsProcessed(state.iterations() * kSortSize);
}

// An argsort: indices stably sorted by their keys, then the keys gathered.
void BM_StdStableSortKeyVal(benchmark::State& state) {
  const std::vector<float> keys = RandomFloats(kSortSize);
  std::vector<int32_t> idx(keys.size());
  std::vector<float> sorted(keys.size());
  for (auto _ : state) {
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return keys[a] < keys[b]; });
    for (size_t i = 0; i < idx.size(); ++i) sorted[i] = keys[idx[i]];
    benchmark::DoNotOptimize(sorted.data());
  }
  state.SetItemsProcessed(state.iterations() * kSortSize);
}

constexpr int64_t kTokens = 4096, kExperts = 64;

void BM_TopK(benchmark::State& state) {
  ir::Op op;
  op.set_opcode("top_k");
  op.mutable_top_k()->set_k(state.range(0));
  op.mutable_top_k()->set_axis(1);
  RunKernel(state, op, {F32(RandomFloats(kTokens * kExperts), {kTokens, kExperts})});
  state.SetItemsProcessed(state.iterations() * kTokens);
}

// Per token: std::partial_sort of the expert indices, largest first, lower index among equals.
void BM_StdPartialSortTopK(benchmark::State& state) {
  const int64_t k = state.range(0);
  const std::vector<float> logits = RandomFloats(kTokens * kExperts);
  std::vector<float> values(kTokens * k);
  std::vector<int32_t> indices(kTokens * k), idx(kExperts);
  for (auto _ : state) {
    for (int64_t t = 0; t < kTokens; ++t) {
      const float* row = &logits[t * kExperts];
      std::iota(idx.begin(), idx.end(), 0);
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
        return row[a] > row[b] || (row[a] == row[b] && a < b);
      });
      for (int64_t j = 0; j < k; ++j) {
        values[t * k + j] = row[idx[j]];
        indices[t * k + j] = idx[j];
      }
    }
    benchmark::DoNotOptimize(values.data());
    benchmark::DoNotOptimize(indices.data());
  }
  state.SetItemsProcessed(state.iterations() * kTokens);
}

BENCHMARK(BM_Sort)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StdSort)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SortKeyVal)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StdStableSortKeyVal)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TopK)->Arg(2)->Arg(8)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StdPartialSortTopK)->Arg(2)->Arg(8)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace shardjit

BENCHMARK_MAIN();
