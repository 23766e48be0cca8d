#include "passes/spmd/reshard.h"

#include <algorithm>
#include <map>
#include <string>

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

// Whether every dimension is split into as many blocks by `a` as by `b`.
bool SameBlocks(const ir::Mesh& mesh, const Spec& a, const Spec& b) {
  for (int64_t d = 0; d < a.rank(); ++d) {
    if (AxesSize(mesh, a.dims[d]) != AxesSize(mesh, b.dims[d])) return false;
  }
  return true;
}

// The mesh axes `a` or `b` uses, in mesh order.
AxisList AxesOfEither(const ir::Mesh& mesh, const Spec& a, const Spec& b) {
  const AxisList used_a = a.Axes(), used_b = b.Axes();
  AxisList out;
  for (const ir::MeshAxis& axis : mesh.axes()) {
    if (std::find(used_a.begin(), used_a.end(), axis.name()) != used_a.end() ||
        std::find(used_b.begin(), used_b.end(), axis.name()) != used_b.end()) {
      out.push_back(axis.name());
    }
  }
  return out;
}

// The block a device holds under `spec`, one index per dimension, from its coordinate along each
// of `axes` (the device's combined index over them is `index`).
std::vector<int64_t> BlockOf(const ir::Mesh& mesh, const Spec& spec, const AxisList& axes,
                             int64_t index) {
  std::map<std::string, int64_t> coord;
  for (int64_t k = static_cast<int64_t>(axes.size()) - 1; k >= 0; --k) {
    const int64_t size = AxesSize(mesh, {axes[k]});
    coord[axes[k]] = index % size;
    index /= size;
  }
  std::vector<int64_t> block;
  for (const AxisList& dim : spec.dims) {
    int64_t b = 0;
    for (const std::string& a : dim) b = b * AxesSize(mesh, {a}) + coord[a];
    block.push_back(b);
  }
  return block;
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> PermutePairs(const ir::Mesh& mesh,
                                                      const ReshardStep& step) {
  const int64_t n = AxesSize(mesh, step.axes);
  std::vector<std::vector<int64_t>> held(n), needed(n);
  for (int64_t i = 0; i < n; ++i) {
    held[i] = BlockOf(mesh, step.before, step.axes, i);
    needed[i] = BlockOf(mesh, step.after, step.axes, i);
  }
  std::vector<int64_t> source_of(n, -1);
  std::vector<bool> sending(n, false);
  bool moves = false;
  for (int64_t t = 0; t < n; ++t) {
    if (held[t] == needed[t]) source_of[t] = t, sending[t] = true;
  }
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t s = 0; s < n && source_of[t] < 0; ++s) {
      if (!sending[s] && held[s] == needed[t]) source_of[t] = s, sending[s] = true, moves = true;
    }
  }
  std::vector<std::pair<int64_t, int64_t>> pairs;
  if (!moves) return pairs;
  for (int64_t t = 0; t < n; ++t) pairs.push_back({source_of[t], t});
  return pairs;
}

std::vector<ReshardStep> PlanReshard(const ir::Mesh& mesh, const Spec& from, const Spec& to) {
  std::vector<ReshardStep> steps;
  if (from != to && SameBlocks(mesh, from, to)) {
    steps.push_back({ReshardStep::Kind::kPermute, AxesOfEither(mesh, from, to), -1, -1, from, to});
    return steps;
  }
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
  if (step.kind == ReshardStep::Kind::kPermute) {
    return PermutePairs(mesh, step).empty() ? CommCost{} : CommCost{bytes, 1};
  }
  if (step.kind == ReshardStep::Kind::kAllGather) return {AllGatherBytes(bytes, n), 1};
  return {AllToAllBytes(bytes, n), 1};
}

CommCost ReshardCost(const ir::Mesh& mesh, const ir::ShapedType& global, const Spec& from,
                     const Spec& to) {
  CommCost total;
  for (const ReshardStep& step : PlanReshard(mesh, from, to)) {
    total += StepCost(mesh, global, step);
  }
  return total;
}

}  // namespace shardjit::passes::spmd
