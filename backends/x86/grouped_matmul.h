// gmm and tgmm (megablox's grouped matmuls, ir/prims/grouped_matmul.cc) on the x86 GEMM: each
// non-empty group is one strided product read in place (a group starting or ending inside a
// register tile needs no copy: the GEMM's edge kernels store only the group's rows), split into
// column (then row) blocks, and all blocks of all groups run in one parallel loop over the
// device's threads, largest first. Empty groups cost nothing; rows outside the local groups (gmm)
// and empty groups (tgmm) are zeroed.
#ifndef SHARDJIT_BACKENDS_X86_GROUPED_MATMUL_H_
#define SHARDJIT_BACKENDS_X86_GROUPED_MATMUL_H_

#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends::x86 {

// f32 or bf16 operands and results; runs on the threads of base::CurrentParallelism().
absl::StatusOr<std::vector<ir::Tensor>> GroupedMatmul(const ir::Op& op,
                                                      const std::vector<ir::Tensor>& operands,
                                                      ir::Allocator* allocator);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_GROUPED_MATMUL_H_
