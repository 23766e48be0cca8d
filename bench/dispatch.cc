// What one call of a jitted program costs beyond its kernels: programs on a few elements, so that
// the time is the call's own (argument checks and the compile-cache lookup, starting the devices,
// collectives' hand-offs, assembling results). Per device count N (a mesh {x:N} of a runtime
// with N devices):
//  - dispatch/add: jit(shard_map(x + 1)) on f32[8N] through the jitted function (its compile
//    cache looked up by the arguments), dispatch/add_compiled through its Compiled program;
//  - dispatch/global_add: a global-view jit of x + 1 (partitioned: every device runs its block);
//  - dispatch/{psum,ppermute,all_gather}: one f32 per device (ppermute: a ring), N = 2 and 4.
//
//   bazel run -c opt //bench:dispatch
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "fmt/format.h"
#include "frontend/shardjit.h"

namespace shardjit {
namespace {

// A runtime of `devices` devices, a mesh {x: devices} and an f32[8 * devices] argument split
// over it, made once per device count.
struct Setup {
  explicit Setup(int devices)
      : rt({.num_devices = devices}),
        mesh(*make_mesh(rt, {{"x", devices}})),
        x(*device_put(*random::normal(random::key(1), {8 * devices}),
                      NamedSharding(mesh, P("x")))) {}
  Runtime rt;
  Mesh mesh;
  Array x;
};

Setup& SetupFor(int devices) {
  static auto* setups = new std::map<int, std::unique_ptr<Setup>>();
  std::unique_ptr<Setup>& s = (*setups)[devices];
  if (s == nullptr) s = std::make_unique<Setup>(devices);
  return *s;
}

// Times `call` (one call of a program) per iteration, after one call that compiles it.
void TimeCalls(benchmark::State& state, const std::function<absl::Status()>& call) {
  if (absl::Status warm = call(); !warm.ok()) return state.SkipWithError(warm.ToString().c_str());
  for (auto _ : state) {
    if (absl::Status st = call(); !st.ok()) return state.SkipWithError(st.ToString().c_str());
  }
}

// jit(shard_map(x + 1)) over `mesh`'s axis x.
Jitted<Array> AddOne(const Mesh& mesh) {
  return jit(shard_map([](Tracer b) { return b + 1.0; }, mesh, {P("x")}, {P("x")}));
}

void BM_Add(benchmark::State& state) {
  Setup& s = SetupFor(static_cast<int>(state.range(0)));
  auto f = AddOne(s.mesh);
  TimeCalls(state, [&] { return f(s.x).status(); });
}

void BM_AddCompiled(benchmark::State& state) {
  Setup& s = SetupFor(static_cast<int>(state.range(0)));
  auto lowered = AddOne(s.mesh).lower(s.x);
  if (!lowered.ok()) return state.SkipWithError(lowered.status().ToString().c_str());
  auto compiled = lowered->compile();
  if (!compiled.ok()) return state.SkipWithError(compiled.status().ToString().c_str());
  TimeCalls(state, [&] { return compiled->call({s.x}).status(); });
}

void BM_Global(benchmark::State& state) {
  Setup& s = SetupFor(static_cast<int>(state.range(0)));
  auto f = jit([](Tracer a) { return a + 1.0; });
  TimeCalls(state, [&] { return f(s.x).status(); });
}

void BM_Collective(benchmark::State& state, const std::string& op) {
  const int n = static_cast<int>(state.range(0));
  Setup& s = SetupFor(n);
  std::vector<std::pair<int64_t, int64_t>> ring;
  for (int64_t i = 0; i < n; ++i) ring.emplace_back(i, (i + 1) % n);
  std::function<Tracer(Tracer)> body;
  if (op == "psum") body = [](Tracer b) { return lax::psum(b, "x"); };
  if (op == "ppermute") body = [ring](Tracer b) { return lax::ppermute(b, "x", ring); };
  if (op == "all_gather")
    body = [](Tracer b) { return lax::all_gather(b, "x", 0, /*tiled=*/true); };
  // One element per device: the first of each block. all_gather's result varies over x in the
  // body's types; out_specs P() takes the gathered copies as equal (check_vma off, as in JAX).
  auto f = jit(shard_map([body](Tracer b) { return body(lax::slice(b, {0}, {1})); }, s.mesh,
                         {P("x")}, {op == "all_gather" ? P() : P("x")},
                         /*check_vma=*/op != "all_gather"));
  TimeCalls(state, [&] { return f(s.x).status(); });
}

void Register() {
  auto each = [](benchmark::internal::Benchmark* b) {
    b->Arg(1)->Arg(2)->Arg(4)->UseRealTime()->Unit(benchmark::kMicrosecond);
  };
  each(benchmark::RegisterBenchmark("dispatch/add", BM_Add));
  each(benchmark::RegisterBenchmark("dispatch/add_compiled", BM_AddCompiled));
  each(benchmark::RegisterBenchmark("dispatch/global_add", BM_Global));
  for (const char* op : {"psum", "ppermute", "all_gather"}) {
    benchmark::RegisterBenchmark(fmt::format("dispatch/{}", op).c_str(), BM_Collective,
                                 std::string(op))
        ->Arg(2)
        ->Arg(4)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace
}  // namespace shardjit

int main(int argc, char** argv) {
  shardjit::Register();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
