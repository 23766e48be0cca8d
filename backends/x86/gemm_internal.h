// Entry points below Gemm's dispatch, for tests and benchmarks: run one level with an optional
// plan (blocking, portable kernels) instead of the default one.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_INTERNAL_H_
#define SHARDJIT_BACKENDS_X86_GEMM_INTERNAL_H_

#include "absl/status/status.h"
#include "backends/x86/gemm.h"
#include "backends/x86/gemm_driver.h"

namespace shardjit::backends::x86::internal {

// Runs the implementation of `isa` on `args` (validated here) with `plan` if non-null, else the
// default plan of `isa`. Does not check that the CPU has `isa`: with plan->portable_kernels any
// level runs on any host.
absl::Status GemmWithPlan(const GemmArgs& args, IsaLevel isa, const GemmPlan* plan);

}  // namespace shardjit::backends::x86::internal

#endif  // SHARDJIT_BACKENDS_X86_GEMM_INTERNAL_H_
