// Cache-blocked transpose for the x86 backend. A transpose that moves the input's innermost dim
// (after dropping size-1 dims and merging dims that stay adjacent) is a batch of 2-D transposes
// between that dim and the output's innermost one; these run in square tiles that fit in L1, so
// both the reads and the writes stream. Others (innermost dim kept: contiguous runs) return
// Unimplemented so the reference kernel, which copies runs with memcpy, takes them.
#ifndef SHARDJIT_BACKENDS_X86_TRANSPOSE_H_
#define SHARDJIT_BACKENDS_X86_TRANSPOSE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends::x86 {

// The `transpose` kernel (a reference::Kernel).
absl::StatusOr<std::vector<ir::Tensor>> TransposeKernel(const ir::Op& op,
                                                        const std::vector<ir::Tensor>& operands,
                                                        ir::Allocator* allocator);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_TRANSPOSE_H_
