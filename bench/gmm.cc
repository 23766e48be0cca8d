// gmm and tgmm at mixture-of-experts shapes on every core: the x86 grouped kernel against a loop
// of per-group GEMM calls of this backend (each call split over every core) and against one
// dense GEMM of the same total size, in one run; each allocates its f32 result per call from a
// device allocator, as a program does (which keeps freed blocks: a fresh 256 MiB tgmm result
// would be page-faulted anew on every call). GFLOPS counts the rows actually multiplied
// (2 * sum(group_sizes) * k * n). Group sizes: uniform, skewed (group i gets a share ~ 1/(i+1)),
// and half empty (every other group empty, the rest uniform). With 64 groups, "paired_with_dense"
// calls the grouped kernel and the dense GEMM in turn and reports the median ratio of their rates.
//   bazel run -c opt //bench:gmm -- --benchmark_filter='m:4096'
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/x86/gemm.h"
#include "backends/x86/grouped_matmul.h"
#include "base/status_macros.h"
#include "base/thread_pool.h"
#include "benchmark/benchmark.h"
#include "ir/primitive.h"
#include "ir/tensor.h"
#include "ir/types.h"
#include "runtime/device.h"

namespace shardjit {
namespace {

using ir::DType;
using ir::Tensor;

// The result allocator of every measurement: a device's, as a program's results come from.
ir::Allocator* DeviceAllocator() {
  static auto* allocator = new std::shared_ptr<runtime::AccountingAllocator>(
      std::make_shared<runtime::AccountingAllocator>());
  return allocator->get();
}

base::Parallelism AllCores() {
  static auto* pool = new base::ThreadPool(base::AvailableCores() - 1);
  return {pool, base::AvailableCores()};
}

std::vector<int32_t> GroupSizes(const std::string& kind, int64_t m, int64_t g) {
  std::vector<double> weight(g, 1.0);
  for (int64_t i = 0; i < g; ++i) {
    if (kind == "skewed") weight[i] = 1.0 / static_cast<double>(i + 1);
    if (kind == "half_empty") weight[i] = i % 2 == 0 ? 1.0 : 0.0;
  }
  double total = 0;
  for (double w : weight) total += w;
  std::vector<int32_t> sizes(g);
  int64_t assigned = 0;
  for (int64_t i = 0; i < g; ++i) {
    sizes[i] = static_cast<int32_t>(static_cast<double>(m) * weight[i] / total);
    assigned += sizes[i];
  }
  sizes[0] += static_cast<int32_t>(m - assigned);  // every row in some group
  return sizes;
}

Tensor Filled(DType dtype, std::vector<int64_t> dims) {
  Tensor t = Tensor::Empty({dtype, std::move(dims)});
  if (dtype == DType::kF32) {
    for (int64_t i = 0; i < t.num_elements(); ++i) t.data_as<float>()[i] = 0.001f * (i % 97);
  } else {
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      t.data_as<ir::bf16>()[i] = ir::bf16(0.001f * (i % 97));
    }
  }
  return t;
}

struct Problem {
  bool tgmm = false;
  DType dtype = DType::kBF16;
  int64_t m = 0, k = 0, n = 0, g = 0;
  std::string sizes;
};

struct Setup {
  ir::Op op;
  std::vector<Tensor> operands;
  std::vector<int32_t> sizes;
  double flops = 0;  // on the rows multiplied
};

Setup MakeSetup(const Problem& p) {
  Setup s;
  s.sizes = GroupSizes(p.sizes, p.m, p.g);
  s.op.set_opcode(p.tgmm ? "tgmm" : "gmm");
  s.op.mutable_grouped_matmul()->set_preferred_element_type(ir::F32);
  if (p.tgmm) s.op.mutable_grouped_matmul()->set_num_actual_groups(p.g);
  s.operands.push_back(Filled(p.dtype, p.tgmm ? std::vector<int64_t>{p.k, p.m}
                                              : std::vector<int64_t>{p.m, p.k}));
  s.operands.push_back(Filled(p.dtype, p.tgmm ? std::vector<int64_t>{p.m, p.n}
                                              : std::vector<int64_t>{p.g, p.k, p.n}));
  Tensor sizes = Tensor::Empty({DType::kS32, {p.g}});
  std::memcpy(sizes.data(), s.sizes.data(), p.g * sizeof(int32_t));
  s.operands.push_back(sizes);
  std::vector<ir::ShapedType> types;
  for (const Tensor& t : s.operands) types.push_back(t.type());
  const ir::ShapedType out = (*ir::InferResultTypes({}, types, s.op))[0];
  *s.op.add_result_types() = ir::ToProto(out);
  s.flops = 2.0 * static_cast<double>(p.m) * p.k * p.n;
  return s;
}

void Finish(benchmark::State& state, double flops) {
  state.counters["GFLOPS"] =
      benchmark::Counter(flops * 1e-9 * state.iterations(), benchmark::Counter::kIsRate);
}

// One grouped call, its result from the device allocator.
absl::Status RunGrouped(const Setup& s) {
  ASSIGN_OR_RETURN(std::vector<Tensor> out,
                   backends::x86::GroupedMatmul(s.op, s.operands, DeviceAllocator()));
  benchmark::DoNotOptimize(out.front().data());
  return absl::OkStatus();
}

void BM_Grouped(benchmark::State& state, const Problem& p) {
  const Setup s = MakeSetup(p);
  base::ScopedParallelism parallel(AllCores());
  for (auto _ : state) {
    if (absl::Status st = RunGrouped(s); !st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      break;
    }
  }
  Finish(state, s.flops);
}

// One GEMM call per non-empty group, each split over every core (what a program of per-group
// dot_generals on row slices would run).
void BM_PerGroupLoop(benchmark::State& state, const Problem& p) {
  const Setup s = MakeSetup(p);
  const int64_t elem = ir::DTypeSize(p.dtype);
  const auto* lhs = static_cast<const char*>(s.operands[0].data());
  const auto* rhs = static_cast<const char*>(s.operands[1].data());
  for (auto _ : state) {
    // The sizes cover every row; tgmm's empty groups are zeros.
    Tensor result = Tensor::Empty(ir::FromProto(s.op.result_types(0)), DeviceAllocator());
    auto* out = static_cast<float*>(result.data());
    int64_t row = 0;
    for (int64_t g = 0; g < p.g; ++g) {
      const int64_t rows = s.sizes[g];
      if (rows == 0) {
        if (p.tgmm) std::memset(out + g * p.k * p.n, 0, p.k * p.n * sizeof(float));
        continue;
      }
      backends::x86::GemmArgs a;
      a.type = p.dtype == DType::kBF16 ? backends::x86::GemmType::kBf16Bf16F32
                                       : backends::x86::GemmType::kF32F32F32;
      a.parallel = AllCores();
      if (!p.tgmm) {
        a.shape = {rows, p.n, p.k};
        a.a = lhs + row * p.k * elem;
        a.b = rhs + g * p.k * p.n * elem;
        a.c = out + row * p.n;
      } else {
        a.shape = {p.k, p.n, rows};
        a.a = lhs + row * elem;
        a.a_row_stride = p.m;
        a.b = rhs + row * p.n * elem;
        a.c = out + g * p.k * p.n;
      }
      if (absl::Status st = backends::x86::Gemm(a); !st.ok()) {
        state.SkipWithError(std::string(st.message()).c_str());
        return;
      }
      row += rows;
    }
    benchmark::DoNotOptimize(result.data());
  }
  Finish(state, s.flops);
}

// One dense GEMM of the grouped product's size on every core: [m,k] x [k,n] for gmm, [k,m] x
// [m,n] for tgmm.
struct Dense {
  explicit Dense(const Problem& p)
      : a(Filled(p.dtype, p.tgmm ? std::vector<int64_t>{p.k, p.m}
                                 : std::vector<int64_t>{p.m, p.k})),
        b(Filled(p.dtype, p.tgmm ? std::vector<int64_t>{p.m, p.n}
                                 : std::vector<int64_t>{p.k, p.n})),
        result_type({DType::kF32, {p.tgmm ? p.k : p.m, p.n}}),
        flops(2.0 * static_cast<double>(p.m) * p.k * p.n) {
    args.type = p.dtype == DType::kBF16 ? backends::x86::GemmType::kBf16Bf16F32
                                        : backends::x86::GemmType::kF32F32F32;
    args.shape = p.tgmm ? backends::x86::GemmShape{p.k, p.n, p.m}
                        : backends::x86::GemmShape{p.m, p.n, p.k};
    args.a = a.data();
    args.b = b.data();
    args.parallel = AllCores();
  }
  // One call, its result from the device allocator.
  absl::Status Run() {
    Tensor c = Tensor::Empty(result_type, DeviceAllocator());
    args.c = c.data();
    absl::Status st = backends::x86::Gemm(args);
    benchmark::DoNotOptimize(c.data());
    return st;
  }

  Tensor a, b;
  ir::ShapedType result_type;
  double flops;
  backends::x86::GemmArgs args;
};

void BM_Dense(benchmark::State& state, const Problem& p) {
  Dense dense(p);
  for (auto _ : state) {
    if (absl::Status st = dense.Run(); !st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      break;
    }
  }
  Finish(state, dense.flops);
}

// The grouped call and the dense GEMM of the same size called in turn (which goes first
// alternates), each timed alone: the median over pairs of the grouped rate over the dense rate
// ("ratio"). Two calls a few ms apart see the same state of this shared machine, which drifts
// between benchmarks more than between two calls.
void BM_PairedWithDense(benchmark::State& state, const Problem& p) {
  const Setup s = MakeSetup(p);
  Dense dense(p);
  base::ScopedParallelism parallel(AllCores());
  std::vector<double> ratios;
  auto timed = [](auto call) -> absl::StatusOr<double> {
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(call());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (auto _ : state) {
    absl::StatusOr<double> grouped, dense_s;
    if (ratios.size() % 2 == 0) {
      grouped = timed([&] { return RunGrouped(s); });
      dense_s = timed([&] { return dense.Run(); });
    } else {
      dense_s = timed([&] { return dense.Run(); });
      grouped = timed([&] { return RunGrouped(s); });
    }
    if (!grouped.ok() || !dense_s.ok()) {
      state.SkipWithError("a call failed");
      break;
    }
    // The same flops (the groups cover every row): the rates' ratio is the times' inverse.
    ratios.push_back(*dense_s / *grouped);
  }
  if (ratios.empty()) return;
  std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
  state.counters["ratio"] = ratios[ratios.size() / 2];
}

void RegisterAll() {
  std::vector<Problem> problems;
  for (bool tgmm : {false, true}) {
    for (DType dtype : {DType::kBF16, DType::kF32}) {
      for (const auto& [m, kn] : {std::pair<int64_t, int64_t>{4096, 1024}, {16384, 2048}}) {
        for (int64_t g : {8, 64}) {
          for (const char* sizes : {"uniform", "skewed", "half_empty"}) {
            problems.push_back({tgmm, dtype, m, kn, kn, g, sizes});
          }
        }
      }
    }
  }
  for (const Problem& p : problems) {
    const std::string name = std::string(p.tgmm ? "tgmm" : "gmm") + "/" +
                             std::string(ir::DTypeName(p.dtype)) + "/m:" + std::to_string(p.m) +
                             "/kn:" + std::to_string(p.k) + "/g:" + std::to_string(p.g) + "/" +
                             p.sizes;
    benchmark::RegisterBenchmark((name + "/grouped").c_str(), BM_Grouped, p)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((name + "/per_group_loop").c_str(), BM_PerGroupLoop, p)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    if (p.g == 64) {
      benchmark::RegisterBenchmark((name + "/paired_with_dense").c_str(), BM_PairedWithDense, p)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    if (p.sizes == std::string("uniform") && p.g == 8) {
      benchmark::RegisterBenchmark((name + "/dense").c_str(), BM_Dense, p)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
}

}  // namespace
}  // namespace shardjit

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  shardjit::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
