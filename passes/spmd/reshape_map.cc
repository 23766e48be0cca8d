#include "passes/spmd/reshape_map.h"

#include <optional>

namespace shardjit::passes::spmd {
namespace {

// The axes of the group in flattened order, or nullopt when some device's block is not one
// contiguous run: a dimension after one split only partly (block size > 1) must not be split.
std::optional<AxisList> Flatten(const ir::Mesh& mesh, const std::vector<int64_t>& sizes,
                                const std::vector<AxisList>& dims) {
  AxisList flat;
  bool open = true;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const int64_t n = AxesSize(mesh, dims[k]);
    if (n > 1 && !open) return std::nullopt;
    flat.insert(flat.end(), dims[k].begin(), dims[k].end());
    if (sizes[k] / n > 1) open = false;
  }
  return flat;
}

// Places the flattened axes on the group's dimensions major first: a dimension takes axes while
// they divide what is left of it, and only a dimension split completely passes axes on.
std::optional<std::vector<AxisList>> Unflatten(const ir::Mesh& mesh, const AxisList& flat,
                                               const std::vector<int64_t>& sizes) {
  std::vector<AxisList> dims(sizes.size());
  size_t next = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    int64_t left = sizes[k];
    while (next < flat.size()) {
      int64_t n = AxesSize(mesh, {flat[next]});
      if (left % n != 0) break;
      left /= n;
      dims[k].push_back(flat[next++]);
    }
    if (left > 1 && next < flat.size()) return std::nullopt;
  }
  if (next < flat.size()) return std::nullopt;
  return dims;
}

}  // namespace

std::vector<ReshapeGroup> ReshapeGroups(const std::vector<int64_t>& from,
                                        const std::vector<int64_t>& to) {
  std::vector<ReshapeGroup> groups;
  int64_t count = 1;
  for (int64_t d : from) count *= d;
  if (count == 0) {  // nothing to move: one group holding every dimension
    ReshapeGroup all;
    for (size_t i = 0; i < from.size(); ++i) all.from.push_back(i);
    for (size_t j = 0; j < to.size(); ++j) all.to.push_back(j);
    return {all};
  }
  size_t i = 0, j = 0;
  while (i < from.size() || j < to.size()) {
    ReshapeGroup g;
    if (i < from.size() && from[i] == 1) {
      g.from.push_back(i++);
    } else if (j < to.size() && to[j] == 1) {
      g.to.push_back(j++);
    } else {
      int64_t pi = 1, pj = 1;
      if (i < from.size()) {
        pi = from[i];
        g.from.push_back(i++);
      }
      if (j < to.size()) {
        pj = to[j];
        g.to.push_back(j++);
      }
      while (pi != pj) {
        if (pi < pj && i < from.size()) {
          pi *= from[i];
          g.from.push_back(i++);
        } else if (pj < pi && j < to.size()) {
          pj *= to[j];
          g.to.push_back(j++);
        } else {
          break;
        }
      }
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

Spec MapReshape(const ir::Mesh& mesh, const std::vector<int64_t>& from, const Spec& spec,
                const std::vector<int64_t>& to, Spec* operand) {
  Spec out = Replicated(to.size());
  if (operand != nullptr) *operand = spec;
  for (const ReshapeGroup& g : ReshapeGroups(from, to)) {
    std::vector<int64_t> from_sizes, to_sizes;
    std::vector<AxisList> from_dims;
    for (int64_t d : g.from) {
      from_sizes.push_back(from[d]);
      from_dims.push_back(spec.dims[d]);
    }
    for (int64_t d : g.to) to_sizes.push_back(to[d]);
    std::optional<AxisList> flat = Flatten(mesh, from_sizes, from_dims);
    std::optional<std::vector<AxisList>> mapped;
    if (flat) mapped = Unflatten(mesh, *flat, to_sizes);
    if (mapped) {
      for (size_t k = 0; k < g.to.size(); ++k) out.dims[g.to[k]] = (*mapped)[k];
    } else if (operand != nullptr) {
      for (int64_t d : g.from) operand->dims[d].clear();
    }
  }
  return out;
}

}  // namespace shardjit::passes::spmd
