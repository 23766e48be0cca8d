// Collective matmul: each program as jit compiles it (`fused`: collective-fusion's choice by its
// time model), with every ring the pass can build (`ring`: the time model ignored) and with the
// pass disabled (`unfused`), side by side in one run, on 1-D meshes of 2, 4 and 8 devices and the
// 2x2 and 4x4 meshes: all_gather + dot_general (x's rows gathered over x, w's columns split over
// every device, so no work is done twice), dot_general + psum_scatter (K split over x, the rows of
// the result scattered over x), and the seed notebook's variants (c) and (d). The yardstick is one
// bf16 GEMM of the whole product on every core (`full_gemm`).
// Counters: GFLOPS of the whole product; work_MiB, the largest device's peak memory in a run above
// what it held before (its inputs); MiB_saved: the unfused work_MiB minus this row's.
//
//   bazel run -c opt //bench:collective_matmul -- [--benchmark_filter=...]
#include <map>
#include <memory>
#include <string>

#include "backends/x86/gemm.h"
#include "base/thread_pool.h"
#include "bench/full_gemm.h"
#include "benchmark/benchmark.h"
#include "examples/seed_variants.h"
#include "fmt/format.h"
#include "ir/ir.pb.h"
#include "runtime/device.h"

namespace shardjit {
namespace {

constexpr int64_t kM = 2048, kK = 2048, kN = 1024;

Runtime& SharedRuntime() {
  static auto* rt = new Runtime({.num_devices = 16});
  return *rt;
}

struct MeshShape {
  std::string name;
  std::vector<std::pair<std::string, int64_t>> axes;
};

const std::vector<MeshShape>& Meshes() {
  static const auto* meshes = new std::vector<MeshShape>{
      {"i2", {{"x", 2}}}, {"i4", {{"x", 4}}}, {"i8", {{"x", 8}}},
      {"2x2", {{"x", 2}, {"y", 2}}}, {"4x4", {{"x", 4}, {"y", 4}}}};
  return *meshes;
}

// One program on one mesh: its inputs and its fused and unfused compilations.
struct Case {
  Mesh mesh;
  std::vector<Array> args;
  Jitted<Array> fused, ring, unfused;
  bool has_ring = true;      // whether `ring` differs from `fused`
  int64_t unfused_work = 0;  // filled by the unfused benchmark, read by the others
};

enum class Mode { kUnfused, kFused, kRing };

// Restarts the devices' peak tracking; returns what each holds now.
std::vector<int64_t> ResetPeaks(const Mesh& mesh) {
  std::vector<int64_t> held;
  for (int64_t id : mesh.proto().device_ids()) {
    runtime::AccountingAllocator* a = SharedRuntime().device(static_cast<int>(id)).allocator();
    a->ResetPeak();
    held.push_back(a->stats().current_bytes);
  }
  return held;
}

// The largest rise of a device's peak above what it held at ResetPeaks.
int64_t WorkBytes(const Mesh& mesh, const std::vector<int64_t>& held) {
  int64_t work = 0;
  for (int p = 0; p < mesh.proto().device_ids_size(); ++p) {
    const int id = static_cast<int>(mesh.proto().device_ids(p));
    work = std::max(work, SharedRuntime().memory(id).peak_bytes - held[p]);
  }
  return work;
}

JitOptions Options(Mode mode) {
  JitOptions options;
  if (mode == Mode::kUnfused) options.pipeline.disabled = {"collective-fusion"};
  options.collective_fusion.ignore_time_model = mode == Mode::kRing;
  return options;
}

using Body = std::function<Tracer(Tracer, Tracer)>;

std::unique_ptr<Case> MakeCase(const MeshShape& shape, const std::vector<int64_t>& x_dims,
                               const std::vector<int64_t>& w_dims,
                               const std::vector<PartitionSpec>& in_specs,
                               const PartitionSpec& out_spec, const Body& body) {
  Mesh mesh = *make_mesh(SharedRuntime(), shape.axes);
  std::vector<Array> args = {*device_put(*random::normal(random::key(1), x_dims, DType::kBF16),
                                         NamedSharding(mesh, in_specs[0])),
                             *device_put(*random::normal(random::key(2), w_dims, DType::kBF16),
                                         NamedSharding(mesh, in_specs[1]))};
  auto compile = [&](Mode mode) {
    return jit(shard_map(body, mesh, in_specs, {out_spec}), Options(mode));
  };
  return std::make_unique<Case>(
      Case{mesh, args, compile(Mode::kFused), compile(Mode::kRing), compile(Mode::kUnfused)});
}

void Run(benchmark::State& state, Case& c, Mode mode) {
  Jitted<Array>& program = mode == Mode::kFused  ? c.fused
                           : mode == Mode::kRing ? c.ring
                                                 : c.unfused;
  if (absl::StatusOr<Array> warm = program(c.args[0], c.args[1]); !warm.ok()) {
    state.SkipWithError(std::string(warm.status().message()).c_str());
    return;
  }
  const std::vector<int64_t> held = ResetPeaks(c.mesh);
  for (auto _ : state) {
    absl::StatusOr<Array> out = program(c.args[0], c.args[1]);
    benchmark::DoNotOptimize(out);
  }
  const int64_t work = WorkBytes(c.mesh, held);
  state.counters["GFLOPS"] = benchmark::Counter(2e-9 * kM * kK * kN,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.counters["work_MiB"] = static_cast<double>(work) / (1 << 20);
  if (mode == Mode::kUnfused) c.unfused_work = work;
  if (mode != Mode::kUnfused && c.unfused_work > 0) {
    state.counters["MiB_saved"] = static_cast<double>(c.unfused_work - work) / (1 << 20);
  }
  const auto lowered = program.lower(c.args);
  const std::string text = lowered.ok() ? lowered->as_text() : "";
  state.SetLabel(text.find("dot_accumulate") != std::string::npos ? "ring"
                 : text.find("ppermute_start") != std::string::npos ? "direct fetch"
                                                                      : "as written");
}

void Register(const std::string& name, std::unique_ptr<Case> c) {
  Case* shared = c.release();  // lives as long as the benchmarks
  for (auto [mode, suffix] : {std::pair{Mode::kUnfused, "/unfused"},
                              std::pair{Mode::kFused, "/fused"}, std::pair{Mode::kRing, "/ring"}}) {
    if (mode == Mode::kRing && !shared->has_ring) continue;
    benchmark::RegisterBenchmark((name + suffix).c_str(),
                                 [shared, mode = mode](benchmark::State& s) {
                                   Run(s, *shared, mode);
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.5);
  }
}

const bool registered = [] {
  benchmark::RegisterBenchmark(
      "full_gemm", [](benchmark::State& s) { bench::BM_FullGemm(s, kM, kK, kN); })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->MinTime(0.5);
  for (const MeshShape& m : Meshes()) {
    // w's columns over every device: over x on a 1-D mesh, over (x, y) on a 2-D one.
    const SpecEntry cols = m.axes.size() == 2 ? SpecEntry(Axes{"x", "y"}) : SpecEntry("x");
    const SpecEntry y_cols = m.axes.size() == 2 ? SpecEntry("y") : SpecEntry(None);
    // out = all_gather(x over x) @ w[:, my columns]: each device its columns of every row.
    Register("all_gather_dot/" + m.name,
             MakeCase(m, {kM, kK}, {kK, kN}, {P("x", None), P(None, cols)}, P(None, cols),
                      [](Tracer x, Tracer w) {
                        return lax::dot_general(lax::all_gather(x, "x", 0, true), w,
                                                DotDims{{1}, {0}}, DType::kF32);
                      }));
    // Partial products over x's share of K, scattered over x by rows (N split over y).
    Register("dot_psum_scatter/" + m.name,
             MakeCase(m, {kM, kK}, {kK, kN}, {P(None, "x"), P("x", y_cols)}, P("x", y_cols),
                      [](Tracer x, Tracer w) {
                        return lax::psum_scatter(
                            lax::dot_general(x, w, DotDims{{1}, {0}}, DType::kF32), "x", 0, true);
                      }));
  }
  // The seed notebook's variants (c) and (d) (examples/seed_variants.h).
  for (const char* mesh_name : {"2x2", "4x4"}) {
    for (const MeshShape& m : Meshes()) {
      if (m.name != mesh_name) continue;
      Mesh mesh = *make_mesh(SharedRuntime(), m.axes);
      std::vector<examples::SeedVariant> fused = examples::SeedVariants(mesh, kK);
      std::vector<examples::SeedVariant> unfused =
          examples::SeedVariants(mesh, kK, DefaultBackend(), {"collective-fusion"});
      for (int i : {2, 3}) {
        std::vector<Array> args = {
            *device_put(*random::normal(random::key(1), {kM, kK}, DType::kBF16),
                        NamedSharding(mesh, P("x", "y"))),
            *device_put(*random::normal(random::key(2), {kK, kN}, DType::kBF16),
                        NamedSharding(mesh, P("x", None)))};
        Register("seed_" + fused[i].name + "/" + m.name,
                 std::make_unique<Case>(
                     Case{mesh, args, fused[i].program, fused[i].program, unfused[i].program,
                          /*has_ring=*/false}));
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace shardjit

BENCHMARK_MAIN();
