#include "passes/spmd/reshard.h"

#include <algorithm>

#include "passes/spmd/cost.h"

namespace shardjit::passes::spmd {
namespace {

// Whether `prefix` is a prefix of `list`.
bool StartsWith(const AxisList& list, const AxisList& prefix) {
  return prefix.size() <= list.size() && std::equal(prefix.begin(), prefix.end(), list.begin());
}

// Axes of `to[d]` past the common prefix with `cur[d]`, provided `cur[d]` is that prefix.
bool OnlyAdds(const Spec& cur, const Spec& to, int64_t d) {
  return CommonPrefix(cur.dims[d], to.dims[d]).size() == cur.dims[d].size();
}

}  // namespace

std::vector<ReshardStep> PlanReshard(const Spec& from, const Spec& to) {
  std::vector<ReshardStep> steps;
  Spec cur = from;
  const int64_t rank = from.rank();
  // 1. all_to_all: dimension d1 drops its trailing axes A, which dimension d2 (that has nothing
  // to drop) gains next.
  for (bool moved = true; moved;) {
    moved = false;
    for (int64_t d1 = 0; d1 < rank && !moved; ++d1) {
      size_t keep = CommonPrefix(cur.dims[d1], to.dims[d1]).size();
      AxisList drop(cur.dims[d1].begin() + keep, cur.dims[d1].end());
      if (drop.empty()) continue;
      for (int64_t d2 = 0; d2 < rank && !moved; ++d2) {
        if (d2 == d1 || !OnlyAdds(cur, to, d2)) continue;
        AxisList gain(to.dims[d2].begin() + cur.dims[d2].size(), to.dims[d2].end());
        if (!StartsWith(gain, drop)) continue;
        ReshardStep step{ReshardStep::Kind::kAllToAll, drop, d1, d2, cur, cur};
        step.after.dims[d1].resize(keep);
        step.after.dims[d2].insert(step.after.dims[d2].end(), drop.begin(), drop.end());
        cur = step.after;
        steps.push_back(std::move(step));
        moved = true;
      }
    }
  }
  // 2. all_gather: every dimension drops the axes past its common prefix with the target.
  for (int64_t d = 0; d < rank; ++d) {
    size_t keep = CommonPrefix(cur.dims[d], to.dims[d]).size();
    if (keep == cur.dims[d].size()) continue;
    AxisList drop(cur.dims[d].begin() + keep, cur.dims[d].end());
    ReshardStep step{ReshardStep::Kind::kAllGather, drop, d, -1, cur, cur};
    step.after.dims[d].resize(keep);
    cur = step.after;
    steps.push_back(std::move(step));
  }
  // 3. dynamic_slice: every dimension gains the target's remaining axes.
  if (cur != to) steps.push_back({ReshardStep::Kind::kDynamicSlice, {}, -1, -1, cur, to});
  return steps;
}

CommCost StepCost(const ir::Mesh& mesh, const ir::ShapedType& global, const ReshardStep& step) {
  const int64_t n = AxesSize(mesh, step.axes);
  if (step.kind == ReshardStep::Kind::kDynamicSlice || n == 1) return {};
  const int64_t bytes = BlockBytes(mesh, step.before, global);
  if (step.kind == ReshardStep::Kind::kAllGather) return {AllGatherBytes(bytes, n), 1};
  return {AllToAllBytes(bytes, n), 1};
}

CommCost ReshardCost(const ir::Mesh& mesh, const ir::ShapedType& global, const Spec& from,
                     const Spec& to) {
  CommCost total;
  for (const ReshardStep& step : PlanReshard(from, to)) total += StepCost(mesh, global, step);
  return total;
}

}  // namespace shardjit::passes::spmd
