// Inlining of per-device regions (shard_map bodies) into the function the SPMD partitioner
// builds.
#ifndef SHARDJIT_PASSES_SPMD_INLINE_H_
#define SHARDJIT_PASSES_SPMD_INLINE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "passes/op_emitter.h"

namespace shardjit::passes::spmd {

// Appends the ops of `region`, a closed per-device region, to the emitter's current region with
// its params bound to `args` (values of the block types of its params), and returns the values
// of its results. Every value, nested regions' included, gets a fresh id; ops keep their name
// scope and location.
absl::StatusOr<std::vector<int64_t>> InlineRegion(OpEmitter& emitter, const ir::Region& region,
                                                  const std::vector<int64_t>& args);

}  // namespace shardjit::passes::spmd

#endif  // SHARDJIT_PASSES_SPMD_INLINE_H_
