// Registry of reference kernels: plain C++ for every local (non-collective, non-control-flow)
// primitive. They are the oracle for every fast path and the fallback backend.
#ifndef SHARDJIT_BACKENDS_REFERENCE_KERNEL_H_
#define SHARDJIT_BACKENDS_REFERENCE_KERNEL_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends::reference {

// Computes the results of `op` (result types are in op.result_types()) from its operands,
// allocating results from `allocator`. Inputs have been verified against the shape rule.
using Kernel = std::function<absl::StatusOr<std::vector<ir::Tensor>>(
    const ir::Op& op, const std::vector<ir::Tensor>& operands, ir::Allocator* allocator)>;

bool RegisterKernel(std::string name, Kernel kernel);
// nullptr when no kernel is registered under `name`.
const Kernel* FindKernel(std::string_view name);

// Runs the kernel of local op `op` in host memory (e.g. to fold constants); NotFound when the op
// has no reference kernel.
absl::StatusOr<std::vector<ir::Tensor>> EvaluateLocalOp(const ir::Op& op,
                                                        const std::vector<ir::Tensor>& operands);

// The result type i of `op`.
ir::ShapedType ResultType(const ir::Op& op, int i = 0);

// OK when `operands` pass op's shape rule and it gives exactly op's declared result types. Fast
// kernels call it before indexing operands by attributes (InvalidArgument naming the op, the
// operand types and the mismatch otherwise).
absl::Status CheckOperandTypes(const ir::Op& op, const std::vector<ir::Tensor>& operands);

// The buffer a kernel that updates `x` writes into: x's own when the kernel holds its only
// reference (the evaluator donated it at its last use), after an acquire fence that orders the
// writes after the reads of a holder that released its copy on another thread; else a copy in
// `allocator`'s memory.
ir::Tensor WritableOrCopy(const ir::Tensor& x, ir::Allocator* allocator);

// A gather's FILL_OR_DROP value, an array of shape [] and `dtype`: fill_bits when set, else
// fill_value.
ir::Tensor GatherFill(const ir::GatherAttrs& a, ir::DType dtype);

// Element i of integer tensor `t` (an index of any integer dtype) as an int64; u64 values past
// the int64 range saturate (out of range of every dimension either way).
int64_t IndexValue(const ir::Tensor& t, int64_t i);
// Every element of `t` as IndexValue reads it.
std::vector<int64_t> IndexValues(const ir::Tensor& t);

}  // namespace shardjit::backends::reference

#endif  // SHARDJIT_BACKENDS_REFERENCE_KERNEL_H_
