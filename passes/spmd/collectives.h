// The collectives the SPMD partitioner emits: the steps of a resharding plan
// (passes/spmd/reshard.h) and the reduction that combines partial results.
#ifndef SHARDJIT_PASSES_SPMD_COLLECTIVES_H_
#define SHARDJIT_PASSES_SPMD_COLLECTIVES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "ir/types.h"
#include "passes/op_emitter.h"
#include "passes/spmd/spec.h"

namespace shardjit::passes::spmd {

// The local block of a value of global type `global`, laid out by `from`, relaid out by `to`.
// Collectives over axes of total size 1 are left out.
absl::StatusOr<int64_t> EmitReshard(OpEmitter& e, int64_t id, const ir::ShapedType& global,
                                    const Spec& from, const Spec& to);
// Combines partial results over `axes`: `collective` (psum, pmax or pmin) or, when
// scatter_dim >= 0, a tiled psum_scatter onto that dimension. Nothing for axes of size 1.
absl::StatusOr<int64_t> EmitCombine(OpEmitter& e, int64_t id, const std::string& collective,
                                    const AxisList& axes, int64_t scatter_dim);

}  // namespace shardjit::passes::spmd

#endif  // SHARDJIT_PASSES_SPMD_COLLECTIVES_H_
