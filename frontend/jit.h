// jit: traces a function over tracers into a module, lowers it through the pass pipeline,
// compiles it for the runtime's devices and runs it on Arrays. Compiled programs are cached by
// the argument types and shardings.
#ifndef SHARDJIT_FRONTEND_JIT_H_
#define SHARDJIT_FRONTEND_JIT_H_

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/array.h"
#include "frontend/lowering.h"
#include "frontend/traced_function.h"
#include "passes/collective_fusion.h"
#include "passes/cost_analysis.h"
#include "passes/pipeline.h"

namespace shardjit {
namespace backends {
class Executable;
}  // namespace backends
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

// A program compiled for a mesh; run it on Arrays of the types it was lowered for.
class Compiled {
 public:
  explicit Compiled(std::shared_ptr<const CompiledState> state) : state_(std::move(state)) {}

  // `options`: a deadline and a cancellation token (runtime/run_options.h).
  absl::StatusOr<std::vector<Array>> Run(const std::vector<Array>& args,
                                         const RunOptions& options = {}) const;
  template <typename... A>
  absl::StatusOr<std::vector<Array>> operator()(const A&... args) const {
    return Run(std::vector<Array>{args...});
  }
  // The lowered (per-device or global-view) module that runs.
  const ir::Module& module() const;
  std::string as_text() const;
  // The compiled per-device (or global-view) program.
  const backends::Executable& executable() const;

 private:
  friend absl::StatusOr<std::vector<Array>> RunMpmd(const std::vector<Compiled>& programs,
                                                    const std::vector<int>& program_of,
                                                    const std::vector<Array>& args,
                                                    const runtime::CollectivePlan* plan,
                                                    const RunOptions& options);
  std::shared_ptr<const CompiledState> state_;
};

// Runs per-device programs compiled for one mesh with the same argument and result types and
// layouts, position p running programs[program_of[p]] (mpmd_map, frontend/mpmd.h). `plan`
// (optional) resolves the collectives of all the programs' functions.
absl::StatusOr<std::vector<Array>> RunMpmd(const std::vector<Compiled>& programs,
                                           const std::vector<int>& program_of,
                                           const std::vector<Array>& args,
                                           const runtime::CollectivePlan* plan,
                                           const RunOptions& options);

// A traced and lowered program, before compilation.
class Lowered {
 public:
  Lowered(ir::Module traced, ir::Module lowered, std::vector<passes::StageRecord> stages,
          std::vector<NamedSharding> arg_shardings, JitOptions options)
      : traced_(std::move(traced)),
        lowered_(std::move(lowered)),
        stages_(std::move(stages)),
        arg_shardings_(std::move(arg_shardings)),
        options_(std::move(options)) {}

  const ir::Module& traced_module() const { return traced_; }
  const ir::Module& module() const { return lowered_; }
  const std::vector<passes::StageRecord>& stages() const { return stages_; }
  // The lowered module as IR text; global-view modules say how they run.
  std::string as_text(bool locations = false) const;
  absl::StatusOr<Compiled> compile() const;
  // Flops, bytes communicated and estimated time per device of the lowered module
  // (passes/cost_analysis.h), by the machine model it was lowered for.
  absl::StatusOr<passes::CostReport> cost_analysis() const {
    return passes::AnalyzeCost(lowered_, {.machine = machine_model()});
  }
  // The machine model the partitioner priced plans by, as recorded in the lowered module (the
  // backend's: this host's kept rates on the x86 backend, unless JitOptions::pipeline.machine
  // named one).
  passes::MachineModel machine_model() const {
    return passes::MachineModel::FromProto(lowered_.machine_model());
  }

 private:
  ir::Module traced_;
  ir::Module lowered_;
  std::vector<passes::StageRecord> stages_;
  std::vector<NamedSharding> arg_shardings_;
  JitOptions options_;
};

class Jitted {
 public:
  Jitted(TracedFunction f, JitOptions options);

  // Compiles for the arguments' types and shardings (cached) and runs with `options` (a deadline
  // and a cancellation token, runtime/run_options.h).
  absl::StatusOr<std::vector<Array>> Call(const std::vector<Array>& args,
                                          const RunOptions& options = {}) const;
  template <typename... A>
  absl::StatusOr<std::vector<Array>> operator()(const A&... args) const {
    return Call(std::vector<Array>{args...});
  }
  absl::StatusOr<Lowered> Lower(const std::vector<Array>& args) const;
  // Lowers for arguments of these types and shardings (no data needed).
  absl::StatusOr<Lowered> LowerFor(const std::vector<ShapedType>& types,
                                   const std::vector<NamedSharding>& shardings) const;
  template <typename... A>
  absl::StatusOr<Lowered> lower(const A&... args) const {
    return Lower(std::vector<Array>{args...});
  }
  // Number of compiled programs in the cache.
  size_t cache_size() const;

 private:
  struct State {
    TracedFunction f;
    JitOptions options;
    mutable std::mutex mu;
    std::map<std::string, Compiled> cache;
  };
  std::shared_ptr<State> state_;
};

template <typename F>
Jitted jit(F f, JitOptions options = {}) {
  return Jitted(MakeTracedFunction(std::move(f)), std::move(options));
}

}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_JIT_H_
