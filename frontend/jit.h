// jit: traces a function over tracers into a module, lowers it through the pass pipeline,
// compiles it for the runtime's devices and runs it on Arrays. Compiled programs are cached by
// the argument types and shardings. A function returning one Tracer gives one Array; one
// returning a vector or tuple of Tracers gives a vector of Arrays (so do its Lowered<Result>
// and Compiled<Result>, from jit(f).lower(...) and ->compile()).
#ifndef SHARDJIT_FRONTEND_JIT_H_
#define SHARDJIT_FRONTEND_JIT_H_

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/array.h"
#include "frontend/lowering.h"
#include "frontend/traced_function.h"
#include "passes/machine_model.h"
#include "passes/options.h"

namespace shardjit {
namespace backends {
class Executable;
}  // namespace backends
namespace ir {
class Module;
}  // namespace ir
namespace runtime {
class CollectivePlan;
}  // namespace runtime

struct JitOptions {
  // The module and entry function name.
  std::string name = "main";
  // Shardings of the results (on the arguments' mesh); default: what the program gives
  // (shard_map out_specs), else replicated.
  std::optional<std::vector<PartitionSpec>> out_shardings;
  // Lowering pipeline options (dumps, disabled passes).
  passes::PipelineOptions pipeline;
  // What collective-fusion may do (its time model; f32_partial_sums = false keeps per-op
  // rounding of bf16 partial sums).
  passes::CollectiveFusionOptions collective_fusion;
  Backend backend = DefaultBackend();
};

struct CompiledState;

namespace internal {

// The one Array of `results` (Result = Array), or all of them (Result = std::vector<Array>).
template <typename Result>
absl::StatusOr<Result> TakeResults(absl::StatusOr<std::vector<Array>> results) {
  if constexpr (std::is_same_v<Result, Array>) {
    if (!results.ok()) return results.status();
    if (results->size() != 1) {
      return absl::InternalError("a function of one result gave " +
                                 std::to_string(results->size()));
    }
    return std::move((*results)[0]);
  } else {
    return results;
  }
}

}  // namespace internal

// A program compiled for a mesh, whatever its function returns; run it on Arrays of the types it
// was lowered for. call gives one Array per result of the lowered module.
class CompiledBase {
 public:
  explicit CompiledBase(std::shared_ptr<const CompiledState> state) : state_(std::move(state)) {}

  // `options`: a deadline and a cancellation token (runtime/run_options.h).
  absl::StatusOr<std::vector<Array>> call(const std::vector<Array>& args,
                                          const RunOptions& options = {}) const;
  // The lowered (per-device or global-view) module that runs.
  const ir::Module& module() const;
  std::string as_text() const;
  // The compiled per-device (or global-view) program.
  const backends::Executable& executable() const;

 private:
  friend absl::StatusOr<std::vector<Array>> RunMpmd(const std::vector<CompiledBase>& programs,
                                                    const std::vector<int>& program_of,
                                                    const std::vector<Array>& args,
                                                    const runtime::CollectivePlan* plan,
                                                    const RunOptions& options);
  std::shared_ptr<const CompiledState> state_;
};

// A compiled jitted function (Jitted<Result>::lower(...)->compile()); `Result` is Array when the
// traced function returns one Tracer, else std::vector<Array>, as for Jitted<Result>.
template <typename Result>
class Compiled : public CompiledBase {
 public:
  explicit Compiled(CompiledBase base) : CompiledBase(std::move(base)) {}

  // `options`: a deadline and a cancellation token (runtime/run_options.h).
  absl::StatusOr<Result> call(const std::vector<Array>& args,
                              const RunOptions& options = {}) const {
    return internal::TakeResults<Result>(CompiledBase::call(args, options));
  }
  template <typename... A>
  absl::StatusOr<Result> operator()(const A&... args) const {
    return call(std::vector<Array>{args...});
  }
};

// Runs per-device programs compiled for one mesh with the same argument and result types and
// layouts, position p running programs[program_of[p]] (mpmd_map, frontend/mpmd.h). `plan`
// (optional) resolves the collectives of all the programs' functions.
absl::StatusOr<std::vector<Array>> RunMpmd(const std::vector<CompiledBase>& programs,
                                           const std::vector<int>& program_of,
                                           const std::vector<Array>& args,
                                           const runtime::CollectivePlan* plan,
                                           const RunOptions& options);

// A traced and lowered program, before compilation, whatever its function returns. Copies share
// it. The modules are ir.proto messages (include ir/ir.pb.h to read them).
class LoweredBase {
 public:
  LoweredBase(ir::Module traced, ir::Module lowered, std::vector<passes::StageRecord> stages,
          std::vector<NamedSharding> arg_shardings, JitOptions options);

  const ir::Module& traced_module() const;
  const ir::Module& module() const;
  const std::vector<passes::StageRecord>& stages() const;
  // The lowered module as IR text; global-view modules say how they run.
  std::string as_text(bool locations = false) const;
  absl::StatusOr<CompiledBase> compile() const;
  // Flops, bytes communicated and estimated time per device of the lowered module
  // (passes/cost_analysis.h), by the machine model it was lowered for.
  absl::StatusOr<passes::CostReport> cost_analysis() const;
  // The machine model the partitioner priced plans by, as recorded in the lowered module (the
  // backend's: this host's kept rates on the x86 backend, unless JitOptions::pipeline.machine
  // named one).
  passes::MachineModel machine_model() const;

 private:
  struct State;
  std::shared_ptr<const State> state_;
};

// A lowered jitted function (Jitted<Result>::lower); compile() gives a Compiled<Result>.
template <typename Result>
class Lowered : public LoweredBase {
 public:
  explicit Lowered(LoweredBase base) : LoweredBase(std::move(base)) {}

  absl::StatusOr<Compiled<Result>> compile() const {
    absl::StatusOr<CompiledBase> compiled = LoweredBase::compile();
    if (!compiled.ok()) return compiled.status();
    return Compiled<Result>(*std::move(compiled));
  }
};

// What jit(f) returns, whatever f returns: lowering and the cache of compiled programs.
class JittedBase {
 public:
  JittedBase(TracedFunction f, JitOptions options);

  // Traces and lowers for these arguments' types and shardings.
  absl::StatusOr<LoweredBase> lower(const std::vector<Array>& args) const;
  template <typename... A>
  absl::StatusOr<LoweredBase> lower(const A&... args) const {
    return lower(std::vector<Array>{args...});
  }
  // Lowers for arguments of these types and shardings (no data needed).
  absl::StatusOr<LoweredBase> lower(const std::vector<ShapedType>& types,
                                    const std::vector<NamedSharding>& shardings) const;
  // Number of compiled programs in the cache.
  size_t cache_size() const;

 protected:
  // Compiles for the arguments' types and shardings (cached) and runs; one Array per result.
  absl::StatusOr<std::vector<Array>> CallFlat(const std::vector<Array>& args,
                                              const RunOptions& options) const;

 private:
  struct State {
    TracedFunction f;
    JitOptions options;
    mutable std::mutex mu;
    std::map<std::string, CompiledBase> cache;
  };
  std::shared_ptr<State> state_;
};

// A jitted function; `Result` is Array when the traced function returns one Tracer, else
// std::vector<Array>.
template <typename Result>
class Jitted : public JittedBase {
 public:
  using JittedBase::JittedBase;

  // Compiles for the arguments' types and shardings (cached) and runs with `options` (a deadline
  // and a cancellation token, runtime/run_options.h).
  absl::StatusOr<Result> call(const std::vector<Array>& args,
                              const RunOptions& options = {}) const {
    return internal::TakeResults<Result>(CallFlat(args, options));
  }
  template <typename... A>
  absl::StatusOr<Result> operator()(const A&... args) const {
    return call(std::vector<Array>{args...});
  }

  // Traces and lowers for these arguments' types and shardings; compile() gives a
  // Compiled<Result>.
  absl::StatusOr<Lowered<Result>> lower(const std::vector<Array>& args) const {
    return Wrap(JittedBase::lower(args));
  }
  template <typename... A>
  absl::StatusOr<Lowered<Result>> lower(const A&... args) const {
    return lower(std::vector<Array>{args...});
  }
  // Lowers for arguments of these types and shardings (no data needed).
  absl::StatusOr<Lowered<Result>> lower(const std::vector<ShapedType>& types,
                                        const std::vector<NamedSharding>& shardings) const {
    return Wrap(JittedBase::lower(types, shardings));
  }

 private:
  static absl::StatusOr<Lowered<Result>> Wrap(absl::StatusOr<LoweredBase> lowered) {
    if (!lowered.ok()) return lowered.status();
    return Lowered<Result>(*std::move(lowered));
  }
};

// jax.jit: jit(f)(args...) returns absl::StatusOr<Array> when f returns one Tracer, else
// absl::StatusOr<std::vector<Array>>.
template <typename F>
auto jit(F f, JitOptions options = {}) {
  using Result = std::conditional_t<kReturnsOneTracer<F>, Array, std::vector<Array>>;
  return Jitted<Result>(MakeTracedFunction(std::move(f)), std::move(options));
}

}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_JIT_H_
