#include "frontend/mpmd.h"

#include <map>
#include <mutex>

#include "backends/executable.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "frontend/control_flow.h"
#include "ir/fmt_absl.h"
#include "ir/sharding.h"
#include "ir/verifier.h"
#include "runtime/collective_plan.h"

namespace shardjit {

struct MpmdMapped::Compiled {
  std::vector<CompiledBase> programs;
  ir::Module module;  // the MPMD module: every program, and the one each position runs
  std::unique_ptr<runtime::CollectivePlan> plan;  // every program's collectives
};

struct MpmdMapped::State {
  explicit State(Mesh m) : mesh(std::move(m)) {}
  Mesh mesh;
  std::vector<MpmdProgram> programs;
  std::vector<PartitionSpec> in_specs, out_specs;
  JitOptions options;
  std::vector<int> program_of;  // per position; -1 while unchecked
  absl::Status layout;          // the programs' coverage of the mesh
  mutable std::mutex mu;
  mutable std::map<std::string, std::shared_ptr<const Compiled>> cache;
};

std::vector<int64_t> PositionsAt(const Mesh& mesh, const std::string& axis, int64_t index) {
  std::vector<int64_t> positions;
  const int64_t a = ir::MeshAxisIndex(mesh.proto(), axis);
  if (a < 0) return positions;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    if (ir::MeshCoords(mesh.proto(), p)[a] == index) positions.push_back(p);
  }
  return positions;
}

MpmdMapped::MpmdMapped(Mesh mesh, std::vector<MpmdProgram> programs,
                       std::vector<PartitionSpec> in_specs, std::vector<PartitionSpec> out_specs,
                       JitOptions options)
    : state_(std::make_shared<State>(std::move(mesh))) {
  State& s = *state_;
  s.programs = std::move(programs);
  s.in_specs = std::move(in_specs);
  s.out_specs = std::move(out_specs);
  s.options = std::move(options);
  s.program_of.assign(s.mesh.size(), -1);
  if (s.programs.empty()) {
    s.layout = absl::InvalidArgumentError("mpmd_map: no (positions, function) pair");
    return;
  }
  for (size_t i = 0; i < s.programs.size() && s.layout.ok(); ++i) {
    for (int64_t p : s.programs[i].positions) {
      if (p < 0 || p >= s.mesh.size()) {
        s.layout = absl::InvalidArgumentError(fmt::format(
            "mpmd_map: program {} names position {}, not in mesh of {} positions", i, p,
            s.mesh.size()));
        break;
      }
      if (s.program_of[p] >= 0) {
        s.layout = absl::InvalidArgumentError(fmt::format(
            "mpmd_map: position {} is in programs {} and {}", p, s.program_of[p], i));
        break;
      }
      s.program_of[p] = static_cast<int>(i);
    }
  }
  for (int64_t p = 0; p < s.mesh.size() && s.layout.ok(); ++p) {
    if (s.program_of[p] < 0) {
      s.layout = absl::InvalidArgumentError(
          fmt::format("mpmd_map: position {} of the mesh runs no program", p));
    }
  }
}

absl::StatusOr<std::shared_ptr<const MpmdMapped::Compiled>> MpmdMapped::Compile(
    const std::vector<Array>& args) const {
  const State& s = *state_;
  RETURN_IF_ERROR(s.layout);
  std::string key;
  for (const Array& a : args) key += a.type().ToString() + a.sharding().to_string() + ";";
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (auto it = s.cache.find(key); it != s.cache.end()) return it->second;
  }
  auto compiled = std::make_shared<Compiled>();
  for (size_t i = 0; i < s.programs.size(); ++i) {
    JitOptions options = s.options;
    options.name = fmt::format("{}_program{}", s.options.name, i);
    JittedBase jitted(MakeTracedFunction(ShardMapped<std::vector<Tracer>>(s.programs[i].fn, s.mesh,
                                                                          s.in_specs, s.out_specs)),
                      options);
    absl::StatusOr<LoweredBase> lowered = jitted.lower(args);
    if (!lowered.ok()) {
      return absl::Status(lowered.status().code(),
                          fmt::format("mpmd_map program {}: {}", i, lowered.status().message()));
    }
    ASSIGN_OR_RETURN(CompiledBase program, lowered->compile());
    if (program.module().view() != ir::PER_DEVICE) {
      return absl::InvalidArgumentError(fmt::format(
          "mpmd_map program {}: did not lower to a per-device program", i));
    }
    compiled->programs.push_back(std::move(program));
  }
  // One module: every program's function, and which one each position runs; the verifier
  // checks that they share the entry's signature.
  ir::Module& module = compiled->module;
  module = compiled->programs[0].module();
  module.set_name(s.options.name);
  module.clear_functions();
  for (const CompiledBase& c : compiled->programs) {
    for (const ir::Function& f : c.module().functions()) *module.add_functions() = f;
  }
  for (int program : s.program_of) {
    module.add_position_functions(compiled->programs[program].module().entry());
  }
  if (absl::Status st = ir::VerifyModule(module); !st.ok()) {
    return absl::InvalidArgumentError(fmt::format("mpmd_map: {}", st.message()));
  }
  std::vector<const ir::Function*> functions;
  for (const CompiledBase& c : compiled->programs) {
    functions.push_back(c.executable().function());
  }
  compiled->plan = std::make_unique<runtime::CollectivePlan>(s.mesh.proto(), functions);
  std::lock_guard<std::mutex> lock(s.mu);
  s.cache.emplace(key, compiled);
  return std::shared_ptr<const Compiled>(compiled);
}

absl::StatusOr<std::vector<Array>> MpmdMapped::call(const std::vector<Array>& args,
                                                    const RunOptions& options) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const Compiled> compiled, Compile(args));
  return RunMpmd(compiled->programs, state_->program_of, args, compiled->plan.get(), options);
}

absl::StatusOr<ir::Module> MpmdMapped::lower(const std::vector<Array>& args) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const Compiled> compiled, Compile(args));
  return compiled->module;
}

MpmdMapped mpmd_map(Mesh mesh, std::vector<MpmdProgram> programs,
                    std::vector<PartitionSpec> in_specs, std::vector<PartitionSpec> out_specs,
                    JitOptions options) {
  return MpmdMapped(std::move(mesh), std::move(programs), std::move(in_specs),
                    std::move(out_specs), std::move(options));
}

}  // namespace shardjit
