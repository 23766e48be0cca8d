// Resharding plans: the collectives that turn a value laid out by one spec into the same value
// laid out by another. The partitioner emits them; sharding propagation prices them.
//
// Where both layouts cut the array into blocks of the same shape (each dimension split into as
// many blocks by both), the plan is one ppermute over the axes either uses: each device receives
// the block it needs from a device that holds it (itself where it can). Otherwise a plan has up
// to three phases, each cheaper than the next fallback:
//   1. all_to_all: the minor axes a dimension drops move to the dimension that gains them next;
//   2. all_gather (tiled): each dimension drops the axes past its common prefix with the target;
//   3. dynamic_slice at offsets from axis_index: each dimension gains the target's extra axes.
#ifndef SHARDJIT_PASSES_SPMD_RESHARD_H_
#define SHARDJIT_PASSES_SPMD_RESHARD_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "ir/ir.pb.h"
#include "ir/types.h"
#include "passes/spmd/spec.h"

namespace shardjit::passes::spmd {

struct ReshardStep {
  enum class Kind { kAllToAll, kAllGather, kDynamicSlice, kPermute };
  Kind kind = Kind::kDynamicSlice;
  // kAllGather / kAllToAll / kPermute: the collective's axes.
  AxisList axes;
  // kAllGather: the gathered dimension; kAllToAll: the dimension that loses `axes`.
  int64_t dim = -1;
  // kAllToAll: the dimension that gains `axes`.
  int64_t split_dim = -1;
  // The layout before and after the step (kDynamicSlice: each dimension gains the axes `after`
  // has beyond `before`).
  Spec before, after;
};

// The steps from `from` to `to` (same rank, both valid for the array on `mesh`); empty when
// equal.
std::vector<ReshardStep> PlanReshard(const ir::Mesh& mesh, const Spec& from, const Spec& to);

// A kPermute step's (source, target) pairs over the combined index of its axes: every target
// once, from a source holding the block it needs (itself first), every source once. Empty when
// every device already holds its block.
std::vector<std::pair<int64_t, int64_t>> PermutePairs(const ir::Mesh& mesh,
                                                      const ReshardStep& step);

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
