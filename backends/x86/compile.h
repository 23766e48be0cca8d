// The x86 backend: per-device programs whose dot_general runs on the generated GEMM kernels,
// whose fusions and reductions run as generated loops (chosen for the CPU found at run time) and
// whose slices, concatenations, broadcasts and dynamic updates run as fast copies; other
// primitives use the reference kernels.
#ifndef SHARDJIT_BACKENDS_X86_COMPILE_H_
#define SHARDJIT_BACKENDS_X86_COMPILE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "backends/executable.h"
#include "ir/ir.pb.h"

namespace shardjit::backends::x86 {

// The x86 backend: Compile below, reductions on the generated elementwise kernels, this host's
// machine model (backends/x86/host_rates.h).
const Backend& X86Backend();

// A GEMM splits over the threads the runtime gives the device (base::CurrentParallelism()).
absl::StatusOr<std::unique_ptr<Executable>> Compile(const ir::Function& function);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_COMPILE_H_
