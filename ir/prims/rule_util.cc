#include "ir/prims/rule_util.h"

#include <set>

#include "absl/strings/str_join.h"

namespace shardjit::ir::prims {

absl::Status CheckDimList(const Op& op, const Types& operands, std::string_view attr,
                          const std::vector<int64_t>& dims, int64_t rank) {
  std::set<int64_t> seen;
  for (int64_t d : dims) {
    if (d < 0 || d >= rank) {
      return RuleError(op, operands, "{} entry {} is out of range for rank {}", attr, d, rank);
    }
    if (!seen.insert(d).second) {
      return RuleError(op, operands, "{} repeats dimension {}", attr, d);
    }
  }
  return absl::OkStatus();
}

std::vector<int64_t> ToVector(const google::protobuf::RepeatedField<int64_t>& f) {
  return {f.begin(), f.end()};
}

absl::StatusOr<int64_t> CombinedAxisSize(
    const ShapeContext& ctx, const Op& op, const Types& operands,
    const google::protobuf::RepeatedPtrField<std::string>& axes) {
  if (axes.empty()) return RuleError(op, operands, "needs at least one axis name");
  std::set<std::string> seen;
  int64_t size = 1;
  for (const std::string& name : axes) {
    if (!seen.insert(name).second) {
      return RuleError(op, operands, "axis \"{}\" is named twice", name);
    }
    const MeshAxis* found = nullptr;
    if (ctx.mesh != nullptr) {
      for (const MeshAxis& a : ctx.mesh->axes()) {
        if (a.name() == name) found = &a;
      }
    }
    if (found == nullptr) {
      return RuleError(op, operands, "axis \"{}\" is not in mesh {}", name,
                       ctx.mesh ? MeshToString(*ctx.mesh) : "{}");
    }
    size *= found->size();
  }
  return size;
}

absl::StatusOr<int64_t> GroupSize(
    const Op& op, const Types& operands, int64_t axis_size,
    const google::protobuf::RepeatedPtrField<AxisIndexGroup>& groups, bool equal_sizes) {
  if (groups.empty()) return axis_size;
  std::vector<int> count(axis_size, 0);
  int64_t group_size = groups[0].indices_size();
  for (const AxisIndexGroup& g : groups) {
    if (g.indices_size() == 0) return RuleError(op, operands, "axis_index_groups has an empty group");
    if (equal_sizes && g.indices_size() != group_size) {
      return RuleError(op, operands, "axis_index_groups must all have the same size");
    }
    for (int64_t i : g.indices()) {
      if (i < 0 || i >= axis_size) {
        return RuleError(op, operands, "axis_index_groups index {} is out of range for axis size {}",
                         i, axis_size);
      }
      ++count[i];
    }
  }
  for (int64_t i = 0; i < axis_size; ++i) {
    if (count[i] != 1) {
      return RuleError(op, operands,
                       "axis_index_groups must cover all indices [0, {}) exactly once (index {} "
                       "appears {} times)",
                       axis_size, i, count[i]);
    }
  }
  return group_size;
}

}  // namespace shardjit::ir::prims
