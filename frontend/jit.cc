#include "frontend/jit.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "backends/backend.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "frontend/trace_state.h"
#include "ir/fmt_absl.h"
#include "ir/printer.h"
#include "ir/ir.pb.h"
#include "ir/verifier.h"
#include "passes/cost_analysis.h"
#include "passes/pipeline.h"
#include "runtime/collective_plan.h"
#include "runtime/runtime.h"
#include "runtime/shard_map_cache.h"

namespace shardjit {

struct CompiledState {
  ir::Module module;
  Mesh mesh;
  std::vector<ShapedType> arg_types;
  std::vector<ShapedType> result_types;
  std::vector<NamedSharding> param_shardings;
  std::vector<NamedSharding> result_shardings;
  // JitOptions.out_shardings, when given (results are re-laid out to them if the program's
  // layouts differ, e.g. a shard_map's out_specs).
  std::vector<NamedSharding> requested_shardings;
  std::unique_ptr<backends::Executable> executable;
  // The per-device program's collectives resolved for the mesh, once.
  std::unique_ptr<runtime::CollectivePlan> collective_plan;
  runtime::CompileFn compile;
  std::unique_ptr<runtime::Runtime::ShardMapCache> shard_map_cache;
};

namespace {

absl::StatusOr<ir::Module> Trace(const TracedFunction& f, const std::vector<ShapedType>& types,
                                 const std::vector<NamedSharding>& shardings,
                                 const JitOptions& options) {
  internal::TraceState state;
  for (const NamedSharding& s : shardings) {
    RETURN_IF_ERROR(state.UseMesh(s.mesh(), "jit argument"));
  }
  if (f.arity >= 0 && f.arity != static_cast<int>(types.size())) {
    return absl::InvalidArgumentError(fmt::format("jit: {} takes {} arguments, got {}",
                                                  options.name, f.arity, types.size()));
  }
  std::vector<Tracer> params;
  for (const ShapedType& t : types) params.push_back(state.AddParam(t));
  std::vector<Tracer> results = f.fn(params);
  RETURN_IF_ERROR(state.status());
  std::vector<int64_t> ids;
  for (const Tracer& r : results) {
    if (!r.valid() || r.state() != &state) {
      return absl::InvalidArgumentError(
          fmt::format("jit: {} returned a value that is not a tracer of this trace", options.name));
    }
    ids.push_back(r.id());
  }
  ir::Module m;
  m.set_name(options.name);
  m.set_view(ir::GLOBAL);
  *m.mutable_mesh() = state.mesh();
  m.set_entry(options.name);
  *m.add_functions() = state.builder().Finish(options.name, ids);
  for (const NamedSharding& s : shardings) *m.add_param_shardings() = s.spec().proto();
  // Without out_shardings the result layouts are left to the compiler (as in JAX): sharding
  // propagation picks them, and unpartitioned programs return replicated results.
  if (options.out_shardings) {
    if (options.out_shardings->size() != ids.size()) {
      return absl::InvalidArgumentError(
          fmt::format("jit: {} has {} results but out_shardings has {} entries", options.name,
                      ids.size(), options.out_shardings->size()));
    }
    for (const PartitionSpec& spec : *options.out_shardings) *m.add_result_shardings() = spec.proto();
  }
  RETURN_IF_ERROR(ir::VerifyModule(m));
  return m;
}

// Appends `v` to a cache key as its 8 bytes, and a string as its length and bytes, so that keys
// of different arguments never read alike.
void AppendKey(std::string& key, int64_t v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof(v));
}
void AppendKey(std::string& key, std::string_view s) {
  AppendKey(key, static_cast<int64_t>(s.size()));
  key.append(s);
}

// Everything about the arguments that changes the compiled program: types, specs, and the mesh
// (axes, device assignment and runtime). Made on every call, so built from bytes, not text. Every
// field of ir.proto's Mesh, MeshAxis, PartitionSpec and DimSpec is in it (a test counts them).
// Specs are taken as written: P("x") and P("x", None) compare equal but compile apart.
std::string CacheKey(const std::vector<Array>& args) {
  std::string key;
  key.reserve(128 * args.size());
  for (const Array& a : args) {
    const ShapedType& type = a.type();
    AppendKey(key, static_cast<int64_t>(type.dtype));
    AppendKey(key, type.future);
    AppendKey(key, type.rank());
    for (int64_t d : type.dims) AppendKey(key, d);
    const ir::PartitionSpec& spec = a.sharding().spec().proto();
    AppendKey(key, spec.dims_size());
    for (const ir::DimSpec& dim : spec.dims()) {
      AppendKey(key, dim.axes_size());
      for (const std::string& axis : dim.axes()) AppendKey(key, axis);
    }
    const Mesh& mesh = a.sharding().mesh();
    AppendKey(key, mesh.proto().axes_size());
    for (const ir::MeshAxis& axis : mesh.proto().axes()) {
      AppendKey(key, axis.name());
      AppendKey(key, axis.size());
    }
    AppendKey(key, mesh.proto().device_ids_size());
    for (int64_t id : mesh.proto().device_ids()) AppendKey(key, id);
    AppendKey(key, static_cast<int64_t>(mesh.runtime_id()));
  }
  return key;
}

const ir::Function& Entry(const ir::Module& m) {
  for (const ir::Function& f : m.functions()) {
    if (f.name() == m.entry()) return f;
  }
  return m.functions(0);
}

}  // namespace

struct LoweredBase::State {
  ir::Module traced;
  ir::Module lowered;
  std::vector<passes::StageRecord> stages;
  std::vector<NamedSharding> arg_shardings;
  JitOptions options;
};

LoweredBase::LoweredBase(ir::Module traced, ir::Module lowered,
                         std::vector<passes::StageRecord> stages,
                         std::vector<NamedSharding> arg_shardings, JitOptions options)
    : state_(std::make_shared<const State>(State{std::move(traced), std::move(lowered),
                                                 std::move(stages), std::move(arg_shardings),
                                                 std::move(options)})) {}

const ir::Module& LoweredBase::traced_module() const { return state_->traced; }
const ir::Module& LoweredBase::module() const { return state_->lowered; }
const std::vector<passes::StageRecord>& LoweredBase::stages() const { return state_->stages; }

absl::StatusOr<passes::CostReport> LoweredBase::cost_analysis() const {
  return passes::AnalyzeCost(state_->lowered, {.machine = machine_model()});
}

passes::MachineModel LoweredBase::machine_model() const {
  return passes::MachineModel::FromProto(state_->lowered.machine_model());
}

std::string LoweredBase::as_text(bool locations) const {
  std::string text = ir::PrintModule(state_->lowered, {.locations = locations});
  if (state_->lowered.view() == ir::GLOBAL) {
    text = "# execution: global view, unpartitioned: runs on whole arrays on the host; its "
           "shard_map ops run per device.\n" + text;
  }
  return text;
}

absl::StatusOr<CompiledBase> LoweredBase::compile() const {
  if (state_->lowered.mesh().axes().empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "jit {}: no mesh: pass sharded Arrays or use shard_map", state_->lowered.name()));
  }
  if (state_->arg_shardings.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "jit {}: needs at least one Array argument to find its runtime", state_->lowered.name()));
  }
  ASSIGN_OR_RETURN(Runtime* runtime, state_->arg_shardings[0].mesh().runtime());
  auto state = std::make_shared<CompiledState>(CompiledState{
      state_->lowered, state_->arg_shardings[0].mesh(), {}, {}, {}, {}, {}, nullptr, nullptr, nullptr, nullptr});
  // Kernels split over the threads the runtime gives each device (RuntimeOptions::num_threads).
  const backends::Backend& backend = BackendImpl(state_->options.backend);
  state->compile = [b = &backend](const ir::Function& f) { return b->Compile(f); };
  state->shard_map_cache = std::make_unique<runtime::Runtime::ShardMapCache>();
  const ir::Region& traced_entry = Entry(state_->traced).body();
  for (const ir::Param& p : traced_entry.params()) state->arg_types.push_back(ir::FromProto(p.type()));
  // Global result types: the traced entry's result types (params or op results).
  for (int64_t r : traced_entry.results()) {
    for (const ir::Param& p : traced_entry.params()) {
      if (p.id() == r) state->result_types.push_back(ir::FromProto(p.type()));
    }
    for (const ir::Op& op : traced_entry.ops()) {
      for (int i = 0; i < op.results_size(); ++i) {
        if (op.results(i) == r) state->result_types.push_back(ir::FromProto(op.result_types(i)));
      }
    }
  }
  for (const ir::PartitionSpec& s : state_->lowered.param_shardings()) {
    state->param_shardings.emplace_back(state->mesh, PartitionSpec(s));
  }
  for (size_t r = 0; r < state->result_types.size(); ++r) {
    const bool given = static_cast<int>(r) < state_->lowered.result_shardings_size();
    state->result_shardings.emplace_back(
        state->mesh, given ? PartitionSpec(state_->lowered.result_shardings(r)) : P());
  }
  if (state_->options.out_shardings) {
    for (const PartitionSpec& spec : *state_->options.out_shardings) {
      state->requested_shardings.emplace_back(state->mesh, spec);
    }
  }
  const int64_t compile_start_ns = base::SpanClockNs();
  absl::StatusOr<std::unique_ptr<backends::Executable>> exe =
      state->compile(Entry(state_->lowered));
  if (runtime::Profiler* profiler = runtime->profiler(); profiler != nullptr) {
    const std::string name = fmt::format("compile {}", state_->lowered.name());
    profiler->Record(runtime::Profiler::kHost,
                     {name, "compile", compile_start_ns,
                      base::SpanClockNs() - compile_start_ns, {}});
  }
  if (!exe.ok()) return exe.status();
  state->executable = std::move(*exe);
  if (state_->lowered.view() == ir::PER_DEVICE) {
    state->collective_plan = std::make_unique<runtime::CollectivePlan>(
        state->mesh.proto(), std::vector<const ir::Function*>{state->executable->function()});
  }
  return CompiledBase(std::move(state));
}

const ir::Module& CompiledBase::module() const { return state_->module; }

std::string CompiledBase::as_text() const { return ir::PrintModule(state_->module); }

namespace {

// Checks `args` against the types `s` was compiled for.
absl::Status CheckArgs(const CompiledState& s, const std::vector<Array>& args) {
  if (args.size() != s.arg_types.size()) {
    return absl::InvalidArgumentError(fmt::format("{}: expects {} arguments, got {}",
                                                  s.module.name(), s.arg_types.size(),
                                                  args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].type() != s.arg_types[i]) {
      return absl::InvalidArgumentError(fmt::format("{}: argument {} is {}, compiled for {}",
                                                    s.module.name(), i,
                                                    args[i].type().ToString(),
                                                    s.arg_types[i].ToString()));
    }
  }
  return absl::OkStatus();
}

// Runs per-device programs: position p runs programs[program_of[p]] (all compiled for one mesh,
// with the argument and result types and layouts of programs[0]). `plan` may be null.
absl::StatusOr<std::vector<Array>> RunPerPosition(
    const std::vector<const CompiledState*>& programs, const std::vector<int>& program_of,
    const std::vector<Array>& args, const runtime::CollectivePlan* plan,
    const RunOptions& options) {
  const CompiledState& s = *programs[0];
  const int64_t n = s.mesh.size();
  std::vector<std::vector<Tensor>> local_args(n);
  for (size_t i = 0; i < args.size(); ++i) {
    ASSIGN_OR_RETURN(Array placed, device_put(args[i], s.param_shardings[i]));
    for (int64_t p = 0; p < n; ++p) local_args[p].push_back(placed.shards()[p]);
  }
  std::vector<const backends::Executable*> executables(n);
  for (int64_t p = 0; p < n; ++p) executables[p] = programs[program_of[p]]->executable.get();
  ASSIGN_OR_RETURN(Runtime* runtime, s.mesh.runtime());
  ASSIGN_OR_RETURN(
      std::vector<std::vector<Tensor>> out,
      runtime->RunSpmd(s.mesh.proto(), executables, std::move(local_args), plan, options));
  std::vector<Array> results;
  for (size_t r = 0; r < s.result_types.size(); ++r) {
    std::vector<Tensor> shards;
    for (int64_t p = 0; p < n; ++p) {
      // Positions of other processes have no results here.
      shards.push_back(out[p].empty() ? Tensor() : std::move(out[p][r]));
    }
    results.emplace_back(s.result_types[r], s.result_shardings[r], std::move(shards));
  }
  return results;
}

// Re-lays out results to JitOptions::out_shardings where they differ.
absl::Status ApplyRequestedShardings(const CompiledState& s, std::vector<Array>& results) {
  for (size_t r = 0; r < s.requested_shardings.size() && r < results.size(); ++r) {
    if (results[r].sharding() == s.requested_shardings[r]) continue;
    ASSIGN_OR_RETURN(Array placed, device_put(results[r], s.requested_shardings[r]));
    results[r] = std::move(placed);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Array>> CompiledBase::call(const std::vector<Array>& args,
                                                  const RunOptions& options) const {
  const CompiledState& s = *state_;
  RETURN_IF_ERROR(CheckArgs(s, args));
  std::vector<Array> results;
  if (s.module.view() == ir::PER_DEVICE) {
    ASSIGN_OR_RETURN(std::vector<Array> out,
                     RunPerPosition({&s}, std::vector<int>(s.mesh.size(), 0), args,
                                    s.collective_plan.get(), options));
    results = std::move(out);
  } else {
    std::vector<Tensor> host_args;
    for (const Array& a : args) {
      ASSIGN_OR_RETURN(Tensor h, a.to_host());
      host_args.push_back(std::move(h));
    }
    ASSIGN_OR_RETURN(Runtime* runtime, s.mesh.runtime());
    ASSIGN_OR_RETURN(std::vector<Tensor> out,
                     runtime->RunGlobal(s.mesh.proto(), *s.executable, host_args, s.compile,
                                        *s.shard_map_cache, options));
    for (size_t r = 0; r < out.size(); ++r) {
      ASSIGN_OR_RETURN(Array placed, device_put(out[r], s.result_shardings[r]));
      results.push_back(std::move(placed));
    }
  }
  RETURN_IF_ERROR(ApplyRequestedShardings(s, results));
  return results;
}

absl::StatusOr<std::vector<Array>> RunMpmd(const std::vector<CompiledBase>& programs,
                                           const std::vector<int>& program_of,
                                           const std::vector<Array>& args,
                                           const runtime::CollectivePlan* plan,
                                           const RunOptions& options) {
  std::vector<const CompiledState*> states;
  for (const CompiledBase& c : programs) {
    if (c.state_->module.view() != ir::PER_DEVICE) {
      return absl::InvalidArgumentError(fmt::format(
          "mpmd: program {} did not lower to a per-device program", states.size()));
    }
    states.push_back(c.state_.get());
  }
  RETURN_IF_ERROR(CheckArgs(*states[0], args));
  ASSIGN_OR_RETURN(std::vector<Array> results,
                   RunPerPosition(states, program_of, args, plan, options));
  RETURN_IF_ERROR(ApplyRequestedShardings(*states[0], results));
  return results;
}

const backends::Executable& CompiledBase::executable() const { return *state_->executable; }

JittedBase::JittedBase(TracedFunction f, JitOptions options) : state_(std::make_shared<State>()) {
  state_->f = std::move(f);
  state_->options = std::move(options);
}

absl::StatusOr<LoweredBase> JittedBase::lower(const std::vector<ShapedType>& types,
                                          const std::vector<NamedSharding>& shardings) const {
  ASSIGN_OR_RETURN(ir::Module traced, Trace(state_->f, types, shardings, state_->options));
  ir::Module lowered = traced;
  std::vector<passes::StageRecord> stages;
  const JitOptions& options = state_->options;
  runtime::ProcessGroup* processes = nullptr;
  if (!shardings.empty()) {
    ASSIGN_OR_RETURN(Runtime * runtime, shardings[0].mesh().runtime());
    processes = runtime->processes();
  }
  RETURN_IF_ERROR(LowerModule(lowered,
                              {.pipeline = options.pipeline,
                               .collective_fusion = options.collective_fusion,
                               .backend = options.backend,
                               .processes = processes},
                              &stages));
  return LoweredBase(std::move(traced), std::move(lowered), std::move(stages), shardings, options);
}

absl::StatusOr<LoweredBase> JittedBase::lower(const std::vector<Array>& args) const {
  std::vector<ShapedType> types;
  std::vector<NamedSharding> shardings;
  for (const Array& a : args) {
    types.push_back(a.type());
    shardings.push_back(a.sharding());
  }
  return lower(types, shardings);
}

absl::StatusOr<std::vector<Array>> JittedBase::CallFlat(const std::vector<Array>& args,
                                                        const RunOptions& options) const {
  std::string key = CacheKey(args);
  std::optional<CompiledBase> compiled;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->cache.find(key);
    if (it != state_->cache.end()) compiled = it->second;
  }
  if (!compiled) {
    std::vector<ShapedType> types;
    std::vector<NamedSharding> shardings;
    for (const Array& a : args) {
      types.push_back(a.type());
      shardings.push_back(a.sharding());
    }
    ASSIGN_OR_RETURN(LoweredBase lowered, lower(types, shardings));
    ASSIGN_OR_RETURN(CompiledBase c, lowered.compile());
    compiled = c;
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->cache.emplace(key, c);
  }
  return compiled->call(args, options);
}

size_t JittedBase::cache_size() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->cache.size();
}

}  // namespace shardjit
