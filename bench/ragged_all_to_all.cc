// ragged_all_to_all at MoE shapes: one receiver's data step (runtime::ComputeCollective: checks,
// the copy of `output`, the received rows) against std::memcpy of the same bytes (the output's
// rows plus the received rows), side by side; and the whole collective on a 4-device mesh through
// jit (every device sending and receiving). GB/s counts the bytes written.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backends/x86/compile.h"
#include "benchmark/benchmark.h"
#include "frontend/shardjit.h"
#include "ir/tensor.h"
#include "ir/types.h"
#include "runtime/collective_ops.h"

namespace shardjit {
namespace {

using ir::DType;
using ir::Tensor;

constexpr int64_t kMembers = 4;

Tensor S32(const std::vector<int32_t>& v) {
  Tensor t = Tensor::Empty({DType::kS32, {static_cast<int64_t>(v.size())}});
  std::memcpy(t.data(), v.data(), v.size() * sizeof(int32_t));
  return t;
}

Tensor Filled(const ir::ShapedType& type, uint8_t seed) {
  Tensor t = Tensor::Empty(type);
  for (int64_t i = 0; i < t.byte_size(); ++i) t.data_as<uint8_t>()[i] = static_cast<uint8_t>(i + seed);
  return t;
}

// Every member holds `rows` tokens of `hidden` bf16 and sends each member a quarter of them
// (`per_member` slices each, so `kMembers * per_member` slices), into an output of `rows` rows.
struct Setup {
  runtime::GroupOperands group;
  ir::Op op;
  int64_t received_bytes = 0;
  int64_t output_bytes = 0;
};

Setup MakeSetup(int64_t rows, int64_t hidden, int64_t per_member) {
  Setup s;
  s.op.set_opcode("ragged_all_to_all");
  s.op.mutable_ragged_all_to_all()->add_axes("x");
  const ir::ShapedType type{DType::kBF16, {rows, hidden}};
  *s.op.add_result_types() = ir::ToProto(type);
  const int64_t k = kMembers * per_member;
  const int64_t slice = rows / k;  // every slice the same size: each member receives `rows`
  std::vector<int32_t> offsets(k), sizes(k, static_cast<int32_t>(slice)), out_offsets(k);
  for (int64_t i = 0; i < k; ++i) offsets[i] = static_cast<int32_t>(i * slice);
  for (int64_t m = 0; m < kMembers; ++m) {
    // Sender m's k-th slice to member r lands at (m * per_member + k) * slice on r.
    for (int64_t r = 0; r < kMembers; ++r) {
      for (int64_t j = 0; j < per_member; ++j) {
        out_offsets[r * per_member + j] = static_cast<int32_t>((m * per_member + j) * slice);
      }
    }
    s.group.all_inputs.push_back({Filled(type, static_cast<uint8_t>(m)), Filled(type, 7),
                                  S32(offsets), S32(sizes), S32(out_offsets), S32(sizes)});
    s.group.inputs.push_back(s.group.all_inputs.back()[0]);
    s.group.axis_indices.push_back(m);
  }
  s.group.my_index = 1;
  s.output_bytes = type.byte_size();
  s.received_bytes = kMembers * per_member * slice * hidden * 2;
  return s;
}

void BM_RaggedDataStep(benchmark::State& state) {
  const Setup s = MakeSetup(state.range(0), state.range(1), state.range(2));
  for (auto _ : state) {
    absl::StatusOr<Tensor> out = runtime::ComputeCollective(
        s.op, s.group, backends::x86::X86Backend(), ir::HostAllocator());
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(out->data());
  }
  state.SetBytesProcessed(state.iterations() * (s.output_bytes + s.received_bytes));
}

// The same bytes by memcpy: a fresh buffer filled from `output`, then the received rows.
void BM_MemcpySameBytes(benchmark::State& state) {
  const Setup s = MakeSetup(state.range(0), state.range(1), state.range(2));
  const int64_t k = kMembers * state.range(2);
  const int64_t slice_bytes = s.received_bytes / k;
  for (auto _ : state) {
    Tensor out = Tensor::Empty(s.group.all_inputs[1][1].type(), ir::HostAllocator());
    std::memcpy(out.data(), s.group.all_inputs[1][1].data(), s.output_bytes);
    for (int64_t i = 0; i < k; ++i) {
      std::memcpy(static_cast<char*>(out.data()) + i * slice_bytes,
                  static_cast<const char*>(s.group.all_inputs[i % kMembers][0].data()) +
                      i * slice_bytes,
                  slice_bytes);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * (s.output_bytes + s.received_bytes));
}

// tokens x hidden x slices per member (experts per device).
void Shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"tokens", "hidden", "slices"});
  b->Args({4096, 1024, 2})->Args({8192, 1024, 8})->Args({4096, 2048, 16});
  b->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_RaggedDataStep)->Apply(Shapes);
BENCHMARK(BM_MemcpySameBytes)->Apply(Shapes);

// The whole collective through jit on a 1-D mesh of 4 devices: each device sends a quarter of
// its tokens to every device. Bytes: every device's output and received rows.
void BM_RaggedJit(benchmark::State& state) {
  const int64_t rows = state.range(0), hidden = state.range(1);
  static Runtime* rt = new Runtime({.num_devices = kMembers});
  absl::StatusOr<Mesh> mesh = make_mesh(*rt, {{"x", kMembers}});
  const int64_t quarter = rows / kMembers;
  std::vector<double> offsets, sizes;
  for (int64_t d = 0; d < kMembers; ++d) {
    for (int64_t i = 0; i < kMembers; ++i) {
      offsets.push_back(static_cast<double>(i * quarter));
      sizes.push_back(static_cast<double>(quarter));
    }
  }
  // Sender d's slice lands at d * quarter on every receiver.
  std::vector<double> out_offsets;
  for (int64_t d = 0; d < kMembers; ++d) {
    for (int64_t i = 0; i < kMembers; ++i) out_offsets.push_back(static_cast<double>(d * quarter));
  }
  const NamedSharding sharded(*mesh, P("x"));
  auto put = [&](const Tensor& t) { return *device_put(t, sharded); };
  Array tokens = put(Filled({DType::kBF16, {kMembers * rows, hidden}}, 1));
  Array output = put(Filled({DType::kBF16, {kMembers * rows, hidden}}, 2));
  const ir::ShapedType vec{DType::kS32, {kMembers * kMembers}};
  Array off = put(Tensor::FromDoubles(vec, offsets));
  Array size = put(Tensor::FromDoubles(vec, sizes));
  Array out_off = put(Tensor::FromDoubles(vec, out_offsets));
  auto f = jit(shard_map(
      [](Tracer x, Tracer o, Tracer in_off, Tracer send, Tracer out_off, Tracer recv) {
        return lax::ragged_all_to_all(x, o, in_off, send, out_off, recv, "x");
      },
      *mesh, {P("x"), P("x"), P("x"), P("x"), P("x"), P("x")}, {P("x")}));
  for (auto _ : state) {
    absl::StatusOr<Array> out = f(tokens, output, off, size, out_off, size);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * kMembers * 2 * rows * hidden * 2);
}
BENCHMARK(BM_RaggedJit)
    ->ArgNames({"tokens", "hidden"})
    ->Args({4096, 1024})
    ->Args({8192, 1024})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace shardjit

BENCHMARK_MAIN();
