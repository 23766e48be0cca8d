// How a layout carries through reshape. The dimensions of both shapes split into groups with equal
// element counts (e.g. [8,6] -> [2,4,6]: {0}->{0,1}, {1}->{2}). Within a group each device's block
// must be one contiguous run of the flattened group, ordered by the combined index of the group's
// axes; then the same axes split the other side of the group the same way, major dimension first.
//   [8] P(x) -> [2,4]: P(x,None) (x:2);  [8] P((x,y)) -> [2,4]: P(x,y) (x:2, y:2);
//   [2,4] P(x,None) -> [8]: P(x);  [2,4] P(None,x) -> [8]: replicated (blocks are not contiguous).
// A group that cannot keep its layout is replicated on both sides.
#ifndef SHARDJIT_PASSES_SPMD_RESHAPE_MAP_H_
#define SHARDJIT_PASSES_SPMD_RESHAPE_MAP_H_

#include <cstdint>
#include <vector>

#include "ir/ir.pb.h"
#include "passes/spmd/spec.h"

namespace shardjit::passes::spmd {

struct ReshapeGroup {
  std::vector<int64_t> from, to;  // dimension indices
};

// The groups of a reshape from dims `from` to dims `to` (same element count; size-1 dims form
// groups of their own where they can).
std::vector<ReshapeGroup> ReshapeGroups(const std::vector<int64_t>& from,
                                        const std::vector<int64_t>& to);

// The layout of the reshaped array when the input is laid out by `spec`. When `operand` is not
// null it receives `spec` with the dimensions of the groups that could not keep their layout
// replicated (the layout the input must have for a local reshape).
Spec MapReshape(const ir::Mesh& mesh, const std::vector<int64_t>& from, const Spec& spec,
                const std::vector<int64_t>& to, Spec* operand);

}  // namespace shardjit::passes::spmd

#endif  // SHARDJIT_PASSES_SPMD_RESHAPE_MAP_H_
