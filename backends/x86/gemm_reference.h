// The kReference GEMM: plain C++ loops over the strided operands, f32 accumulation in k order.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_REFERENCE_H_
#define SHARDJIT_BACKENDS_X86_GEMM_REFERENCE_H_

#include "absl/status/status.h"
#include "backends/x86/gemm.h"

namespace shardjit::backends::x86 {

// Runs `args` (validated, row strides and ldc resolved) on this thread; stops early with the
// error of args.parallel.stop once it is requested.
absl::Status GemmReference(const GemmArgs& args);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_GEMM_REFERENCE_H_
