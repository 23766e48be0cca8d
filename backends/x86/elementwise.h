// Dispatch of fused elementwise loops: the `fusion` kernel of the x86 backend and buffer
// reductions for collectives. Kernels are generated for the best ISA at or below the active one
// whose generator accepts the plan (AVX-512, then AVX2; a level that declines is logged once) and
// cached by (plan key, active ISA). Whatever every generator declines (ops or dtypes they cannot
// emit, the ISA capped to reference) returns Unimplemented so the caller falls back to the
// reference kernel; each fallback is counted and its reason logged once.
#ifndef SHARDJIT_BACKENDS_X86_ELEMENTWISE_H_
#define SHARDJIT_BACKENDS_X86_ELEMENTWISE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/reduce_kind.h"
#include "ir/dtype.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends::x86 {

struct ElementwiseStats {
  int64_t kernels = 0;    // generated
  int64_t runs = 0;       // fusions run on generated code
  int64_t fallbacks = 0;  // fusions declined (the caller ran the reference kernel)
};
ElementwiseStats GetElementwiseStats();

// Runs `op` (a fusion) on generated code for the active ISA; Unimplemented when declined.
absl::StatusOr<std::vector<ir::Tensor>> FusionKernel(const ir::Op& op,
                                                     const std::vector<ir::Tensor>& operands,
                                                     ir::Allocator* allocator);

// out[i] = a[i] <kind> b[i] for i < n (f32 or bf16 buffers; `out` may alias `a` or `b`), on
// generated code, else a plain loop when the ISA is capped below AVX2. NaNs propagate as in the
// reference max/min.
absl::Status ReduceBuffers(ReduceKind kind, ir::DType dtype, const void* a, const void* b,
                           void* out, int64_t n);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_ELEMENTWISE_H_
