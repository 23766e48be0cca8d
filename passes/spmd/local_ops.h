// The local form of a global-view op: the same primitive on blocks, with the attributes that
// name global sizes (shapes, slice limits, slice sizes) rewritten to block sizes.
#ifndef SHARDJIT_PASSES_SPMD_LOCAL_OPS_H_
#define SHARDJIT_PASSES_SPMD_LOCAL_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/op_emitter.h"
#include "passes/spmd/rules.h"

namespace shardjit::passes::spmd {

// Appends the local form of `view.op` on `operands` (blocks laid out by `strategy.operands`) and
// returns its results, laid out by `strategy.results` once the strategy's reduction (which this
// does not emit) is applied.
absl::StatusOr<std::vector<int64_t>> EmitLocalOp(OpEmitter& emitter, const OpView& view,
                                                 const Strategy& strategy,
                                                 const std::vector<int64_t>& operands);

}  // namespace shardjit::passes::spmd

#endif  // SHARDJIT_PASSES_SPMD_LOCAL_OPS_H_
