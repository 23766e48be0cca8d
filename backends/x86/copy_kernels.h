// Data-movement kernels of the x86 backend: slice, dynamic_slice, dynamic_update_slice,
// concatenate, broadcast_in_dim, row gathers and f32 row scatter_adds (reference::Kernel
// signatures). Each reduces its copy to the fewest strided loops (reference/strided_copy.h), then
// copies contiguous runs with memcpy, runs under 128 bytes with two fixed-size moves each (the size
// class chosen once per call), broadcast rows by replicating them inside the output and broadcast
// scalars with vector fills. dynamic_update_slice and scatter_add write into their operand's buffer
// when the kernel holds the only reference to it (the evaluator donates a value at its last use).
// The copies move bytes, so they serve every dtype and need no ISA dispatch: memcpy picks its own
// vector width at run time.
#ifndef SHARDJIT_BACKENDS_X86_COPY_KERNELS_H_
#define SHARDJIT_BACKENDS_X86_COPY_KERNELS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends::x86 {

absl::StatusOr<std::vector<ir::Tensor>> SliceKernel(const ir::Op& op,
                                                    const std::vector<ir::Tensor>& operands,
                                                    ir::Allocator* allocator);

// Start indices are clamped like JAX's.
absl::StatusOr<std::vector<ir::Tensor>> DynamicSliceKernel(const ir::Op& op,
                                                           const std::vector<ir::Tensor>& operands,
                                                           ir::Allocator* allocator);

// In place when operands[0].unique(); otherwise copies the operand first. An update as large as the
// operand is returned as the result, an empty update returns the operand (tensors are immutable
// once shared, so sharing storage is safe).
absl::StatusOr<std::vector<ir::Tensor>> DynamicUpdateSliceKernel(
    const ir::Op& op, const std::vector<ir::Tensor>& operands, ir::Allocator* allocator);

// Writes the output in chunks of rows, each operand's part in turn, so small blocks from many
// operands land in cache-resident output.
absl::StatusOr<std::vector<ir::Tensor>> ConcatenateKernel(const ir::Op& op,
                                                          const std::vector<ir::Tensor>& operands,
                                                          ir::Allocator* allocator);

// gather of whole rows along the operand's leading dimension (jnp.take(table, ids, 0), an
// embedding lookup): one memcpy per row, rows out of range clamped or filled as the mode says.
// Unimplemented for other dimension numbers (the reference kernel runs them).
absl::StatusOr<std::vector<ir::Tensor>> GatherRowsKernel(const ir::Op& op,
                                                         const std::vector<ir::Tensor>& operands,
                                                         ir::Allocator* allocator);

// scatter_add of whole f32 rows along the operand's leading dimension (an embedding's gradient):
// each update row added into its table row in order, in place when operands[0].unique(); rows out
// of range clamped (CLIP) or dropped. Unimplemented otherwise (the reference kernel runs it).
absl::StatusOr<std::vector<ir::Tensor>> ScatterAddRowsKernel(
    const ir::Op& op, const std::vector<ir::Tensor>& operands, ir::Allocator* allocator);

absl::StatusOr<std::vector<ir::Tensor>> BroadcastInDimKernel(
    const ir::Op& op, const std::vector<ir::Tensor>& operands, ir::Allocator* allocator);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_COPY_KERNELS_H_
