#include "frontend/lowering.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/backend.h"
#include "backends/reference/evaluator.h"
#include "backends/reference/kernel.h"
#include "backends/x86/compile.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/ir.pb.h"
#include "passes/collective_fusion.h"
#include "passes/pipeline.h"
#include "runtime/remote.h"

namespace shardjit {
namespace {

// `model` replaced by process 0's, so that every process of a job prices plans alike.
absl::Status AgreeOnProcessZeros(runtime::ProcessGroup& group, passes::MachineModel& model) {
  ASSIGN_OR_RETURN(std::string agreed,
                   group.AgreeOn("machine_model",
                                 fmt::format("{:a} {:a} {:a}", model.flops_per_second,
                                             model.bytes_per_second, model.seconds_per_collective)));
  if (std::sscanf(agreed.c_str(), "%la %la %la", &model.flops_per_second, &model.bytes_per_second,
                  &model.seconds_per_collective) != 3) {
    return absl::DataLossError(fmt::format("machine model from process 0: \"{}\"", agreed));
  }
  model.source = fmt::format("process 0 of {}", group.num_processes());
  return absl::OkStatus();
}

}  // namespace

Backend DefaultBackend() {
  const char* env = std::getenv("SHARDJIT_BACKEND");
  return env != nullptr && std::string(env) == "reference" ? Backend::kReference : Backend::kX86;
}

std::optional<Backend> ParseBackend(std::string_view name) {
  if (name == "x86") return Backend::kX86;
  if (name == "reference") return Backend::kReference;
  return std::nullopt;
}

bool AbslParseFlag(absl::string_view text, Backend* backend, std::string* error) {
  std::optional<Backend> parsed = ParseBackend(std::string_view(text.data(), text.size()));
  if (!parsed) {
    *error = fmt::format("must be x86 or reference, got \"{}\"", text);
    return false;
  }
  *backend = *parsed;
  return true;
}

std::string AbslUnparseFlag(Backend backend) {
  return backend == Backend::kReference ? "reference" : "x86";
}

const backends::Backend& BackendImpl(Backend backend) {
  return backend == Backend::kReference ? backends::reference::ReferenceBackend()
                                        : backends::x86::X86Backend();
}

absl::Status LowerModule(ir::Module& module, const LoweringOptions& options,
                         std::vector<passes::StageRecord>* stages) {
  passes::PipelineOptions pipeline = options.pipeline;
  if (!pipeline.machine) {
    pipeline.machine = BackendImpl(options.backend).machine_model();
    if (options.processes != nullptr && options.processes->num_processes() > 1) {
      RETURN_IF_ERROR(AgreeOnProcessZeros(*options.processes, *pipeline.machine));
    }
  }
  return passes::DefaultPipeline(pipeline, {.evaluate = backends::reference::EvaluateLocalOp},
                                 options.collective_fusion)
      .Run(module, stages);
}

}  // namespace shardjit
