// Resharding plans: the collectives that turn a value laid out by one spec into the same value
// laid out by another. The partitioner emits them; sharding propagation prices them.
//
// A plan has up to three phases, each cheaper than the next fallback:
//   1. all_to_all: the minor axes a dimension drops move to the dimension that gains them next;
//   2. all_gather (tiled): each dimension drops the axes past its common prefix with the target;
//   3. dynamic_slice at offsets from axis_index: each dimension gains the target's extra axes.
#ifndef SHARDJIT_PASSES_SPMD_RESHARD_H_
#define SHARDJIT_PASSES_SPMD_RESHARD_H_

#include <cstdint>
#include <vector>

#include "ir/ir.pb.h"
#include "ir/types.h"
#include "passes/spmd/spec.h"

namespace shardjit::passes::spmd {

struct ReshardStep {
  enum class Kind { kAllToAll, kAllGather, kDynamicSlice };
  Kind kind = Kind::kDynamicSlice;
  // kAllGather / kAllToAll: the collective's axes.
  AxisList axes;
  // kAllGather: the gathered dimension; kAllToAll: the dimension that loses `axes`.
  int64_t dim = -1;
  // kAllToAll: the dimension that gains `axes`.
  int64_t split_dim = -1;
  // The layout before and after the step (kDynamicSlice: each dimension gains the axes `after`
  // has beyond `before`).
  Spec before, after;
};

// The steps from `from` to `to` (same rank, both valid for the array); empty when equal.
std::vector<ReshardStep> PlanReshard(const Spec& from, const Spec& to);

// Lexicographic: bytes first (the cost model of passes/spmd/cost.h), then collectives.
struct CommCost {
  int64_t bytes = 0;
  int64_t collectives = 0;

  CommCost& operator+=(const CommCost& o) {
    bytes += o.bytes;
    collectives += o.collectives;
    return *this;
  }
};

// What one step costs a device; steps over axes of total size 1 are free.
CommCost StepCost(const ir::Mesh& mesh, const ir::ShapedType& global, const ReshardStep& step);
// What resharding a value of global type `global` from `from` to `to` costs a device.
CommCost ReshardCost(const ir::Mesh& mesh, const ir::ShapedType& global, const Spec& from,
                     const Spec& to);

}  // namespace shardjit::passes::spmd

#endif  // SHARDJIT_PASSES_SPMD_RESHARD_H_
