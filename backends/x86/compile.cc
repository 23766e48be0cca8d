#include "backends/x86/compile.h"

#include "backends/reference/evaluator.h"
#include "backends/x86/dot_general.h"
#include "backends/x86/elementwise.h"
#include "backends/x86/transpose.h"

namespace shardjit::backends::x86 {

absl::StatusOr<std::unique_ptr<Executable>> Compile(const ir::Function& function) {
  reference::KernelOverrides overrides;
  overrides["dot_general"] = DotGeneral;
  // Declined fusions (Unimplemented) run the reference fusion kernel.
  overrides["fusion"] = FusionKernel;
  // Transposes that keep the innermost dim (Unimplemented) run the reference kernel.
  overrides["transpose"] = TransposeKernel;
  return reference::Compile(function, std::move(overrides), "x86");
}

}  // namespace shardjit::backends::x86
