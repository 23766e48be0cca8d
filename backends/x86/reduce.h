// reduce_sum / reduce_max / reduce_min of the x86 backend (reference::Kernel signatures) for f32
// and bf16 input: f32 accumulation, rounded once to the result dtype. Other dtypes return
// Unimplemented, so the reference kernel runs them.
//
// The input's dims collapse into alternating runs of kept and reduced dims. When the innermost run
// is kept, output rows accumulate input rows in order (out[j] <op>= in[i, j]); when it is reduced,
// each row reduces to a scalar in vector accumulators with a horizontal step at the end
// (reduce_kernel.h). Sums may then differ from the reference's sequential f32 order by rounding.
// max/min are bit-exact with the reference: where lanes may have reordered ties or NaNs (a zero
// result, whose sign comes from the first zero in order, or a NaN, whose payload comes from the
// first NaN), that output is rescanned in order.
#ifndef SHARDJIT_BACKENDS_X86_REDUCE_H_
#define SHARDJIT_BACKENDS_X86_REDUCE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends::x86 {

absl::StatusOr<std::vector<ir::Tensor>> ReduceSumKernel(const ir::Op& op,
                                                        const std::vector<ir::Tensor>& operands,
                                                        ir::Allocator* allocator);
absl::StatusOr<std::vector<ir::Tensor>> ReduceMaxKernel(const ir::Op& op,
                                                        const std::vector<ir::Tensor>& operands,
                                                        ir::Allocator* allocator);
absl::StatusOr<std::vector<ir::Tensor>> ReduceMinKernel(const ir::Op& op,
                                                        const std::vector<ir::Tensor>& operands,
                                                        ir::Allocator* allocator);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_REDUCE_H_
