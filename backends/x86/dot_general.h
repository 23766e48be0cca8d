// dot_general on the x86 GEMM: each batch is one strided GEMM (no transposes materialised).
#ifndef SHARDJIT_BACKENDS_X86_DOT_GENERAL_H_
#define SHARDJIT_BACKENDS_X86_DOT_GENERAL_H_

#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends::x86 {

// Computes dot_general for bf16 or f32 operands (f32 or bf16 results) whose free dims and
// contracting dims each merge into one strided index. UnimplementedError otherwise (the caller
// falls back to the reference kernel). Runs on the threads of backends::CurrentParallelism().
absl::StatusOr<std::vector<ir::Tensor>> DotGeneral(const ir::Op& op,
                                                   const std::vector<ir::Tensor>& operands,
                                                   ir::Allocator* allocator);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_DOT_GENERAL_H_
