#include "ir/collective_groups.h"

#include <algorithm>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"

namespace shardjit::ir {
namespace {

struct AttrFields {
  const google::protobuf::RepeatedPtrField<std::string>* axes;
  const AxisGroups* groups;  // null for the collectives without axis_index_groups
};

AttrFields FieldsOf(const Op& op) {
  switch (op.attrs_case()) {
    case Op::kAllReduce:
      return {&op.all_reduce().axes(), &op.all_reduce().axis_index_groups()};
    case Op::kAllGather:
      return {&op.all_gather().axes(), &op.all_gather().axis_index_groups()};
    case Op::kPsumScatter:
      return {&op.psum_scatter().axes(), &op.psum_scatter().axis_index_groups()};
    case Op::kAllToAll:
      return {&op.all_to_all().axes(), &op.all_to_all().axis_index_groups()};
    case Op::kRaggedAllToAll:
      return {&op.ragged_all_to_all().axes(), &op.ragged_all_to_all().axis_index_groups()};
    case Op::kPpermute:  // ppermute, psend
      return {&op.ppermute().axes(), nullptr};
    case Op::kPbroadcast:
      return {&op.pbroadcast().axes(), nullptr};
    case Op::kPrecv:
      return {&op.precv().axes(), nullptr};
    default:  // axis_index, axis_size; the empty default for other ops
      return {&op.axis().axes(), nullptr};
  }
}

}  // namespace

AxisList CollectiveAxes(const Op& op) { return ToAxisList(*FieldsOf(op).axes); }

const AxisGroups& CollectiveAxisGroups(const Op& op) {
  static const auto* empty = new AxisGroups();
  const AxisGroups* groups = FieldsOf(op).groups;
  return groups != nullptr ? *groups : *empty;
}

absl::StatusOr<int64_t> CheckAxisIndexGroups(const AxisGroups& groups, int64_t axis_size,
                                             bool equal_sizes) {
  if (groups.empty()) return axis_size;
  std::vector<int> count(axis_size, 0);
  const int64_t group_size = groups[0].indices_size();
  for (const AxisIndexGroup& g : groups) {
    if (g.indices_size() == 0) {
      return absl::InvalidArgumentError("axis_index_groups has an empty group");
    }
    if (equal_sizes && g.indices_size() != group_size) {
      return absl::InvalidArgumentError("axis_index_groups must all have the same size");
    }
    for (int64_t i : g.indices()) {
      if (i < 0 || i >= axis_size) {
        return absl::InvalidArgumentError(fmt::format(
            "axis_index_groups index {} is out of range for axis size {}", i, axis_size));
      }
      ++count[i];
    }
  }
  for (int64_t i = 0; i < axis_size; ++i) {
    if (count[i] != 1) {
      return absl::InvalidArgumentError(
          fmt::format("axis_index_groups must cover all indices [0, {}) exactly once (index {} "
                      "appears {} times)",
                      axis_size, i, count[i]));
    }
  }
  return group_size;
}

absl::StatusOr<CollectiveGroup> GroupOf(const Mesh& mesh, int64_t position, const AxisList& axes,
                                        const AxisGroups& groups) {
  ASSIGN_OR_RETURN(int64_t ring_size, CombinedAxisSize(mesh, axes));
  std::vector<int64_t> axis_ids;
  for (const std::string& name : axes) axis_ids.push_back(MeshAxisIndex(mesh, name));
  const std::vector<int64_t> coords = MeshCoords(mesh, position);
  CollectiveGroup group;
  // Adds the member of the ring whose combined index is `index`: `position` moved along `axes`.
  auto add = [&](int64_t index) {
    std::vector<int64_t> c = coords;
    int64_t rest = index;
    for (auto a = axis_ids.rbegin(); a != axis_ids.rend(); ++a) {
      const int64_t size = mesh.axes(*a).size();
      c[*a] = rest % size;
      rest /= size;
    }
    group.members.push_back(MeshPosition(mesh, c));
    group.axis_indices.push_back(index);
  };
  const int64_t mine = CombinedAxisIndex(mesh, position, axes);
  if (groups.empty()) {
    for (int64_t i = 0; i < ring_size; ++i) add(i);
    group.my_index = mine;
    return group;
  }
  for (const AxisIndexGroup& g : groups) {
    for (int k = 0; k < g.indices_size(); ++k) {
      if (g.indices(k) != mine) continue;
      for (int64_t index : g.indices()) {
        if (index < 0 || index >= ring_size) {
          return absl::InvalidArgumentError(fmt::format(
              "axis_index_groups index {} is out of range for axis size {}", index, ring_size));
        }
        add(index);
      }
      group.my_index = k;
      return group;
    }
  }
  return absl::InvalidArgumentError(
      fmt::format("axis index {} is in no axis_index_groups entry", mine));
}

absl::StatusOr<CollectiveGroup> GroupOf(const Mesh& mesh, int64_t position, const Op& op) {
  return GroupOf(mesh, position, CollectiveAxes(op), CollectiveAxisGroups(op));
}

absl::StatusOr<int64_t> GroupSize(const Mesh& mesh, int64_t position, const AxisList& axes,
                                  const AxisGroups& groups) {
  absl::StatusOr<int64_t> ring_size = CombinedAxisSize(mesh, axes);
  if (!ring_size.ok() || groups.empty()) return ring_size;
  const int64_t mine = position < 0 ? -1 : CombinedAxisIndex(mesh, position, axes);
  int64_t largest = 0;
  for (const AxisIndexGroup& g : groups) {
    const auto& indices = g.indices();
    if (mine >= 0 && std::find(indices.begin(), indices.end(), mine) != indices.end()) {
      return g.indices_size();
    }
    largest = std::max<int64_t>(largest, g.indices_size());
  }
  return largest;
}

absl::StatusOr<int64_t> GroupSize(const Mesh& mesh, int64_t position, const Op& op) {
  return GroupSize(mesh, position, CollectiveAxes(op), CollectiveAxisGroups(op));
}

}  // namespace shardjit::ir
