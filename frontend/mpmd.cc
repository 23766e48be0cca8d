#include "frontend/mpmd.h"

#include "absl/strings/str_join.h"
#include "backends/executable.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "frontend/control_flow.h"
#include "ir/printer.h"
#include "ir/sharding.h"
#include "runtime/collective_plan.h"

namespace shardjit {

struct MpmdMapped::Compiled {
  std::vector<shardjit::Compiled> programs;
  std::vector<std::string> texts;
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
  if (!s.layout.ok()) return s.layout;
  std::string key;
  for (const Array& a : args) key += a.type().ToString() + a.sharding().ToString() + ";";
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (auto it = s.cache.find(key); it != s.cache.end()) return it->second;
  }
  auto compiled = std::make_shared<Compiled>();
  std::vector<const ir::Function*> functions;
  for (size_t i = 0; i < s.programs.size(); ++i) {
    JitOptions options = s.options;
    options.name = fmt::format("{}_program{}", s.options.name, i);
    Jitted jitted = jit(ShardMapped(s.programs[i].fn, s.mesh, s.in_specs, s.out_specs), options);
    absl::StatusOr<Lowered> lowered = jitted.Lower(args);
    if (!lowered.ok()) {
      return absl::Status(lowered.status().code(),
                          fmt::format("mpmd_map program {}: {}", i, lowered.status().message()));
    }
    absl::StatusOr<shardjit::Compiled> program = lowered->compile();
    if (!program.ok()) return program.status();
    if (program->module().view() != ir::PER_DEVICE) {
      return absl::InvalidArgumentError(fmt::format(
          "mpmd_map program {}: did not lower to a per-device program", i));
    }
    compiled->texts.push_back(lowered->as_text());
    compiled->programs.push_back(std::move(*program));
  }
  // Every program returns blocks of the first one's types.
  const ir::Region& first = compiled->programs[0].executable().function()->body();
  for (size_t i = 1; i < compiled->programs.size(); ++i) {
    const ir::Region& other = compiled->programs[i].executable().function()->body();
    auto types = [](const ir::Region& r) {
      std::vector<std::string> t;
      for (const ir::Param& p : r.params()) t.push_back(ir::FromProto(p.type()).ToString());
      t.push_back("->");
      std::map<int64_t, std::string> by_id;
      for (const ir::Param& p : r.params()) by_id[p.id()] = ir::FromProto(p.type()).ToString();
      for (const ir::Op& op : r.ops()) {
        for (int k = 0; k < op.results_size(); ++k) {
          by_id[op.results(k)] = ir::FromProto(op.result_types(k)).ToString();
        }
      }
      for (int64_t id : r.results()) t.push_back(by_id[id]);
      return absl::StrJoin(t, " ");
    };
    if (types(first) != types(other)) {
      return absl::InvalidArgumentError(fmt::format(
          "mpmd_map: program {} has signature ({}) but program 0 has ({})", i, types(other),
          types(first)));
    }
  }
  for (const shardjit::Compiled& c : compiled->programs) {
    functions.push_back(c.executable().function());
  }
  compiled->plan = std::make_unique<runtime::CollectivePlan>(s.mesh.proto(), functions);
  std::lock_guard<std::mutex> lock(s.mu);
  s.cache.emplace(key, compiled);
  return std::shared_ptr<const Compiled>(compiled);
}

absl::StatusOr<std::vector<Array>> MpmdMapped::Call(const std::vector<Array>& args,
                                                    const RunOptions& options) const {
  absl::StatusOr<std::shared_ptr<const Compiled>> compiled = Compile(args);
  if (!compiled.ok()) return compiled.status();
  return RunMpmd((*compiled)->programs, state_->program_of, args, (*compiled)->plan.get(),
                 options);
}

absl::StatusOr<std::vector<std::string>> MpmdMapped::LowerText(
    const std::vector<Array>& args) const {
  absl::StatusOr<std::shared_ptr<const Compiled>> compiled = Compile(args);
  if (!compiled.ok()) return compiled.status();
  return (*compiled)->texts;
}

MpmdMapped mpmd_map(Mesh mesh, std::vector<MpmdProgram> programs,
                    std::vector<PartitionSpec> in_specs, std::vector<PartitionSpec> out_specs,
                    JitOptions options) {
  return MpmdMapped(std::move(mesh), std::move(programs), std::move(in_specs),
                    std::move(out_specs), std::move(options));
}

}  // namespace shardjit
