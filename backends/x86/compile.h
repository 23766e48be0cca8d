// The x86 backend: per-device programs whose dot_general runs on the generated GEMM kernels and
// whose fusions run as generated elementwise loops (chosen for the CPU found at run time); other
// primitives use the reference kernels.
#ifndef SHARDJIT_BACKENDS_X86_COMPILE_H_
#define SHARDJIT_BACKENDS_X86_COMPILE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "backends/executable.h"
#include "ir/ir.pb.h"

namespace shardjit::backends::x86 {

struct CompileOptions {
  // Threads one GEMM may use: the cores a device has to itself (1 when devices outnumber cores).
  int num_threads = 1;
};

absl::StatusOr<std::unique_ptr<Executable>> Compile(const ir::Function& function,
                                                    CompileOptions options = {});

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_COMPILE_H_
