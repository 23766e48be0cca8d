// Data movement and reductions: the x86 kernels against the reference kernels on one thread.
// GB/s counts the bytes an op must read and write (its operands' data and its result), except for
// dynamic_update_slice, which counts the update read and written only, so that the in-place
// kernel and the copying ones compare by time.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "backends/reference/kernel.h"
#include "backends/x86/copy_kernels.h"
#include "backends/x86/reduce.h"
#include "benchmark/benchmark.h"
#include "ir/primitive.h"
#include "ir/types.h"

namespace shardjit {
namespace {

using backends::reference::Kernel;
using ir::DType;
using ir::Tensor;

struct Case {
  ir::Op op;
  std::vector<Tensor> operands;
  int64_t bytes = 0;
};

Tensor Index(int64_t v) { return Tensor::FromDoubles({DType::kS32, {}}, {static_cast<double>(v)}); }

Tensor Filled(DType dtype, std::vector<int64_t> dims) {
  Tensor t = Tensor::Empty({dtype, std::move(dims)});
  for (int64_t i = 0; i < t.byte_size(); ++i) t.data_as<uint8_t>()[i] = static_cast<uint8_t>(i);
  return t;
}

// A case of `op` on `operands` with the result type of the shape rule; `bytes` defaults to the
// operands' data plus the result.
Case MakeCase(ir::Op op, std::vector<Tensor> operands) {
  std::vector<ir::ShapedType> types;
  int64_t bytes = 0;
  for (const Tensor& t : operands) {
    types.push_back(t.type());
    if (t.dims().size() > 0) bytes += t.byte_size();
  }
  absl::StatusOr<std::vector<ir::ShapedType>> result = ir::InferResultTypes({}, types, op);
  if (!result.ok()) std::abort();
  *op.add_result_types() = ir::ToProto((*result)[0]);
  return Case{std::move(op), std::move(operands), bytes + (*result)[0].byte_size()};
}

ir::Op Opcode(const std::string& name) {
  ir::Op op;
  op.set_opcode(name);
  return op;
}

Case Slice(std::vector<int64_t> dims, std::vector<int64_t> start, std::vector<int64_t> limit) {
  ir::Op op = Opcode("slice");
  for (int64_t v : start) op.mutable_slice()->add_start_indices(v);
  for (int64_t v : limit) op.mutable_slice()->add_limit_indices(v);
  return MakeCase(op, {Filled(DType::kF32, std::move(dims))});
}

Case DynamicSlice() {
  ir::Op op = Opcode("dynamic_slice");
  for (int64_t v : {1024, 1024}) op.mutable_dynamic_slice()->add_slice_sizes(v);
  return MakeCase(op, {Filled(DType::kBF16, {2048, 2048}), Index(512), Index(512)});
}

Case Concatenate(std::vector<int64_t> a, std::vector<int64_t> b, int64_t dim) {
  ir::Op op = Opcode("concatenate");
  op.mutable_concatenate()->set_dimension(dim);
  return MakeCase(op, {Filled(DType::kF32, std::move(a)), Filled(DType::kF32, std::move(b))});
}

Case Broadcast(std::vector<int64_t> in, std::vector<int64_t> shape, std::vector<int64_t> bdims) {
  ir::Op op = Opcode("broadcast_in_dim");
  for (int64_t v : shape) op.mutable_broadcast_in_dim()->add_shape(v);
  for (int64_t v : bdims) op.mutable_broadcast_in_dim()->add_broadcast_dimensions(v);
  return MakeCase(op, {Filled(DType::kF32, std::move(in))});
}

Case ReduceSum(std::vector<int64_t> axes) {
  ir::Op op = Opcode("reduce_sum");
  for (int64_t a : axes) op.mutable_reduce()->add_axes(a);
  Case c = MakeCase(op, {Filled(DType::kF32, {2048, 2048})});
  // Small integers: sums stay finite and exact.
  float* x = c.operands[0].data_as<float>();
  for (int64_t i = 0; i < c.operands[0].num_elements(); ++i) x[i] = static_cast<float>(i % 7);
  return c;
}

// A 512x512 f32 block into a 2048x2048 f32 operand.
Case DynamicUpdateSlice() {
  Case c = MakeCase(Opcode("dynamic_update_slice"),
                    {Filled(DType::kF32, {2048, 2048}), Filled(DType::kF32, {512, 512}),
                     Index(1024), Index(1024)});
  c.bytes = 2 * c.operands[1].byte_size();
  return c;
}

void Run(benchmark::State& state, const Kernel& kernel, const Case& c) {
  for (auto _ : state) {
    absl::StatusOr<std::vector<Tensor>> out = kernel(c.op, c.operands, ir::HostAllocator());
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(state.iterations() * c.bytes);
}

// dynamic_update_slice with the operand donated: each result is the next call's operand.
void RunInPlace(benchmark::State& state, Case c) {
  c.operands[0] = c.operands[0].Copy();  // held by this run alone
  for (auto _ : state) {
    absl::StatusOr<std::vector<Tensor>> out =
        backends::x86::DynamicUpdateSliceKernel(c.op, c.operands, ir::HostAllocator());
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      break;
    }
    c.operands[0] = std::move((*out)[0]);
  }
  state.SetBytesProcessed(state.iterations() * c.bytes);
}

// Registers name/x86 and name/reference. Both hold `c`, so no operand is unique(): a
// dynamic_update_slice copies its operand.
void Register(const std::string& name, const Kernel& x86, const Case& c) {
  const Kernel* reference = backends::reference::FindKernel(c.op.opcode());
  benchmark::RegisterBenchmark((name + "/x86").c_str(),
                               [x86, c](benchmark::State& s) { Run(s, x86, c); })
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark((name + "/reference").c_str(),
                               [reference, c](benchmark::State& s) { Run(s, *reference, c); })
      ->Unit(benchmark::kMicrosecond);
}

void RegisterAll() {
  namespace x86 = backends::x86;
  // The inner half of every row of a 2048x2048 f32.
  Register("slice_f32_2048x2048_cols_512_1536", x86::SliceKernel,
           Slice({2048, 2048}, {0, 512}, {2048, 1536}));
  // Short runs: 12 bytes of each 32-byte row.
  Register("slice_f32_262144x8_cols_2_5", x86::SliceKernel,
           Slice({262144, 8}, {0, 2}, {262144, 5}));
  Register("dynamic_slice_bf16_1024x1024_of_2048x2048", x86::DynamicSliceKernel, DynamicSlice());
  Register("concatenate_f32_2x1024x2048_axis0", x86::ConcatenateKernel,
           Concatenate({1024, 2048}, {1024, 2048}, 0));
  Register("concatenate_f32_2x1024x2048_axis1", x86::ConcatenateKernel,
           Concatenate({1024, 2048}, {1024, 2048}, 1));
  Register("concatenate_f32_262144x3_262144x5_axis1", x86::ConcatenateKernel,
           Concatenate({262144, 3}, {262144, 5}, 1));
  // out[i, j] = x[j]: a row replicated, and out[i, j] = x[i]: a scalar per row.
  Register("broadcast_f32_2048_to_2048x2048_axis0", x86::BroadcastInDimKernel,
           Broadcast({2048}, {2048, 2048}, {1}));
  Register("broadcast_f32_2048_to_2048x2048_axis1", x86::BroadcastInDimKernel,
           Broadcast({2048}, {2048, 2048}, {0}));
  Register("broadcast_f32_3_to_1048576x3", x86::BroadcastInDimKernel,
           Broadcast({3}, {1048576, 3}, {1}));
  const Case dus = DynamicUpdateSlice();
  benchmark::RegisterBenchmark("dynamic_update_slice_f32_512x512_into_2048x2048/x86_in_place",
                               [dus](benchmark::State& s) { RunInPlace(s, dus); })
      ->Unit(benchmark::kMicrosecond);
  Register("dynamic_update_slice_f32_512x512_into_2048x2048", x86::DynamicUpdateSliceKernel, dus);
  Register("reduce_sum_f32_2048x2048_axis0", x86::ReduceSumKernel, ReduceSum({0}));
  Register("reduce_sum_f32_2048x2048_axis1", x86::ReduceSumKernel, ReduceSum({1}));
  Register("reduce_sum_f32_2048x2048_axes01", x86::ReduceSumKernel, ReduceSum({0, 1}));
}

}  // namespace
}  // namespace shardjit

int main(int argc, char** argv) {
  shardjit::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
