#include "passes/pipeline.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/io.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/collective_fusion.h"
#include "passes/collective_simplify.h"
#include "passes/fuse_elementwise.h"
#include "passes/inline_calls.h"
#include "passes/lower_shard_map.h"
#include "passes/sharding_propagation.h"
#include "passes/spmd_partition.h"

namespace shardjit::passes {
namespace {

// The name a pipeline run's dumps carry: the module's name for the first run of that name into
// `dir` in this process, `<name>.<k>` for the k-th, so that a process compiling several programs
// called "main" keeps every one.
std::string DumpName(const std::string& dir, const std::string& module) {
  static std::mutex mu;
  static auto* runs = new std::map<std::pair<std::string, std::string>, int>();
  std::lock_guard<std::mutex> lock(mu);
  const int k = ++(*runs)[{dir, module}];
  return k == 1 ? module : fmt::format("{}.{}", module, k);
}

absl::Status Dump(const ir::Module& module, const std::string& dir, const std::string& dump_name,
                  int index, const std::string& name) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(fmt::format("cannot create dump folder {}", dir));
  std::string base = fmt::format("{}/{:02d}-{}-{}", dir, index, dump_name, name);
  RETURN_IF_ERROR(ir::WriteModuleFile(module, base + ".txt"));
  return ir::WriteModuleFile(module, base + ".pbtxt");
}

}  // namespace

Pipeline::Pipeline(PipelineOptions options) : options_(std::move(options)) {
  if (options_.dump_dir.empty()) {
    if (const char* env = std::getenv("SHARDJIT_DUMP_TO")) options_.dump_dir = env;
  }
}

Pipeline& Pipeline::Add(std::unique_ptr<Pass> pass) {
  passes_.push_back(std::move(pass));
  return *this;
}

absl::Status Pipeline::Run(ir::Module& module, std::vector<StageRecord>* stages) const {
  if (stages) stages->push_back({"input", false, false, absl::ZeroDuration(), ir::PrintModule(module)});
  std::string dump_name;
  if (!options_.dump_dir.empty()) {
    dump_name = DumpName(options_.dump_dir, module.name());
    RETURN_IF_ERROR(Dump(module, options_.dump_dir, dump_name, 0, "input"));
  }
  int index = 0;
  for (const auto& pass : passes_) {
    ++index;
    StageRecord record{pass->name(), false, false, absl::ZeroDuration(), "(unchanged)"};
    if (options_.disabled.count(pass->name())) {
      record.skipped = true;
      record.text = "(disabled)";
      if (stages) stages->push_back(std::move(record));
      continue;
    }
    absl::Time start = absl::Now();
    absl::StatusOr<bool> changed = pass->Run(module);
    record.time = absl::Now() - start;
    if (!changed.ok()) {
      return absl::Status(changed.status().code(),
                          fmt::format("pass {}: {}", pass->name(), changed.status().message()));
    }
    record.changed = *changed;
    if (*changed && options_.verify_each) {
      if (absl::Status s = ir::VerifyModule(module); !s.ok()) {
        return absl::InternalError(
            fmt::format("pass {} produced an invalid module: {}", pass->name(), s.message()));
      }
    }
    if (*changed) record.text = ir::PrintModule(module);
    if (!options_.dump_dir.empty()) {
      RETURN_IF_ERROR(Dump(module, options_.dump_dir, dump_name, index, pass->name()));
    }
    if (stages) stages->push_back(std::move(record));
  }
  if (options_.machine) *module.mutable_machine_model() = options_.machine->ToProto();
  return absl::OkStatus();
}

Pipeline DefaultPipeline(PipelineOptions options, CanonicalizeOptions canonicalize,
                         CollectiveFusionOptions fusion) {
  if (!options.machine) options.machine = MachineModel{};
  const MachineModel machine = *options.machine;
  Pipeline p(std::move(options));
  p.Add(std::make_unique<InlineCalls>());
  p.Add(std::make_unique<Canonicalize>(std::move(canonicalize)));
  p.Add(std::make_unique<ShardingPropagation>(machine));
  p.Add(std::make_unique<SpmdPartition>(machine));
  p.Add(std::make_unique<LowerShardMap>());
  p.Add(std::make_unique<CollectiveSimplify>());
  p.Add(std::make_unique<CollectiveFusion>(std::move(fusion), machine));
  p.Add(std::make_unique<FuseElementwise>());
  return p;
}

}  // namespace shardjit::passes
