// dot_general on the x86 GEMM for any dimension numbers, without materialised transposes: the
// free dims of each operand and the contracting dims are grouped into runs that merge into one
// strided index; the innermost runs are the GEMM's M, N and K (read through strides by its
// packing), batch dims and the outer runs are loops around it (outer contracting runs
// accumulate into the result, in f32 for a bf16 result, rounded once).
#ifndef SHARDJIT_BACKENDS_X86_DOT_GENERAL_H_
#define SHARDJIT_BACKENDS_X86_DOT_GENERAL_H_

#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends::x86 {

// Computes dot_general for bf16 or f32 operands (f32 or bf16 results); UnimplementedError for
// other dtypes (the caller falls back to the reference kernel). Runs on the threads of
// base::CurrentParallelism().
absl::StatusOr<std::vector<ir::Tensor>> DotGeneral(const ir::Op& op,
                                                   const std::vector<ir::Tensor>& operands,
                                                   ir::Allocator* allocator);

// dot_accumulate: the GEMM adds the product straight into acc's box (in place when acc was
// donated and nothing else holds it), in f32. UnimplementedError where the GEMM cannot (other
// dtypes, a bf16 acc over split contracting dims); acc is then untouched.
absl::StatusOr<std::vector<ir::Tensor>> DotAccumulate(const ir::Op& op,
                                                      const std::vector<ir::Tensor>& operands,
                                                      ir::Allocator* allocator);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_DOT_GENERAL_H_
