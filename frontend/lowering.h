// The one lowering of a traced module to what runs, shared by jit, irdump and irrun: the default
// pipeline (passes/pipeline.h) with constant folding on the reference kernels, its plans priced by
// the backend's machine model (the same model in every process of a job), and the backend that
// compiles the result.
#ifndef SHARDJIT_FRONTEND_LOWERING_H_
#define SHARDJIT_FRONTEND_LOWERING_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "passes/options.h"

namespace shardjit {
namespace backends {
class Backend;
}  // namespace backends
namespace ir {
class Module;
}  // namespace ir
namespace runtime {
class ProcessGroup;
}  // namespace runtime

// Which kernels run the compiled program.
enum class Backend {
  kX86,        // generated x86 kernels for the CPU found at run time, reference kernels elsewhere
  kReference,  // plain C++ kernels only (the oracle)
};

// The backend named by $SHARDJIT_BACKEND ("x86" or "reference"), x86 by default.
Backend DefaultBackend();

// "x86" or "reference" as a Backend; nullopt for other names.
std::optional<Backend> ParseBackend(std::string_view name);

// A Backend as an absl flag value (ABSL_FLAG(Backend, backend, DefaultBackend(), ...)): "x86" or
// "reference".
bool AbslParseFlag(absl::string_view text, Backend* backend, std::string* error);
std::string AbslUnparseFlag(Backend backend);

// The implementation of `backend` (backends/backend.h).
const backends::Backend& BackendImpl(Backend backend);

struct LoweringOptions {
  // Dumps, disabled passes, and the machine model (unset: the backend's).
  passes::PipelineOptions pipeline;
  // What collective-fusion may do.
  passes::CollectiveFusionOptions collective_fusion;
  Backend backend = DefaultBackend();
  // The processes of the job (null: this one alone): every process prices plans by process 0's
  // machine model, so that all of them run one plan.
  runtime::ProcessGroup* processes = nullptr;
};

// Lowers `module` in place; `stages` (optional) receives the module after each pass. The machine
// model used is recorded in the module (ir::Module::machine_model).
absl::Status LowerModule(ir::Module& module, const LoweringOptions& options,
                         std::vector<passes::StageRecord>* stages = nullptr);

}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_LOWERING_H_
