// Cost analysis: the floating-point operations and the bytes one device sends running a module's
// entry function (a per-device program; for a global-view module, ops outside shard_map count in
// full on whole arrays and a shard_map body counts once, as one device runs it).
//
// flops: dot_general 2 * batch * M * N * K (2 per multiply-add); an elementwise op with a
// floating operand or result 1 per result element (integer index arithmetic is free); fusion the
// floating ops of its body per element; reduce_sum/max/min 1 per operand element; everything
// else (data movement, collectives) 0. A fori_loop body counts once per trip; a while_loop's
// cond and body and each cond branch count once (decided at run time).
//
// Bytes sent per device, for a collective over a group of n devices (ring algorithms):
//   all_gather                 (n-1)/n * result bytes
//   psum / pmean / pmax / pmin 2 * (n-1)/n * operand bytes  (reduce-scatter, then all-gather)
//   psum_scatter               (n-1)/n * operand bytes
//   all_to_all                 (n-1)/n * operand bytes
//   ppermute                   operand bytes if the device is a source of the permutation
// n is the size of the named axes, or of the device's axis_index_group.
//
// Estimated time: the machine model's (passes/machine_model.h) for the flops, the bytes sent and
// one fixed cost per collective run, as the partitioner prices its plans.
#ifndef SHARDJIT_PASSES_COST_ANALYSIS_H_
#define SHARDJIT_PASSES_COST_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "passes/machine_model.h"
#include "passes/options.h"

namespace shardjit::passes {


struct CostOptions {
  // The mesh position of the device to analyse; -1: each collective at the device that sends
  // the most (it matters for ppermute and uneven axis_index_groups only).
  int64_t device = -1;
  MachineModel machine;
};

// Flops of a dot_general of operands shaped `lhs` and `rhs`: 2 per multiply-add, 2 * the lhs
// elements * the rhs free elements. Shared with the partitioner, which counts it on blocks.
int64_t DotGeneralFlops(const ir::DotGeneralAttrs& dims, const std::vector<int64_t>& lhs,
                        const std::vector<int64_t>& rhs);

// Flops of a gmm or tgmm (`op`) of operands shaped `lhs` and `rhs`, every row of the grouped
// dimension counted (how many the groups cover is data): 2 * lhs elements * n.
int64_t GroupedMatmulFlops(const ir::Op& op, const std::vector<int64_t>& lhs,
                           const std::vector<int64_t>& rhs);

// Errors: no entry function, or a collective over an axis the mesh lacks.
absl::StatusOr<CostReport> AnalyzeCost(const ir::Module& module, const CostOptions& options = {});

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_COST_ANALYSIS_H_
