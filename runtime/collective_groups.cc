#include "runtime/collective_groups.h"

#include "absl/status/status.h"
#include "fmt/format.h"
#include "ir/sharding.h"
#include "ir/types.h"

namespace shardjit::runtime {

int64_t CombinedAxisIndex(const ir::Mesh& mesh, int64_t position, const AxisNames& axes) {
  std::vector<int64_t> coords = ir::MeshCoords(mesh, position);
  int64_t index = 0;
  for (const std::string& name : axes) {
    int64_t a = ir::MeshAxisIndex(mesh, name);
    index = index * mesh.axes(a).size() + coords[a];
  }
  return index;
}

absl::StatusOr<CollectiveGroup> GroupOf(const ir::Mesh& mesh, int64_t position,
                                        const AxisNames& axes, const AxisGroups& groups) {
  std::vector<int64_t> axis_ids;
  int64_t ring_size = 1;
  for (const std::string& name : axes) {
    int64_t a = ir::MeshAxisIndex(mesh, name);
    if (a < 0) {
      return absl::InvalidArgumentError(
          fmt::format("axis \"{}\" is not in mesh {}", name, ir::MeshToString(mesh)));
    }
    axis_ids.push_back(a);
    ring_size *= mesh.axes(a).size();
  }
  std::vector<int64_t> coords = ir::MeshCoords(mesh, position);
  // ring[i]: the mesh position whose combined index along `axes` is i.
  std::vector<int64_t> ring(ring_size);
  for (int64_t i = 0; i < ring_size; ++i) {
    std::vector<int64_t> c = coords;
    int64_t rest = i;
    for (int64_t k = static_cast<int64_t>(axis_ids.size()) - 1; k >= 0; --k) {
      int64_t size = mesh.axes(axis_ids[k]).size();
      c[axis_ids[k]] = rest % size;
      rest /= size;
    }
    ring[i] = ir::MeshPosition(mesh, c);
  }
  int64_t mine = CombinedAxisIndex(mesh, position, axes);
  CollectiveGroup group;
  if (groups.empty()) {
    group.members = ring;
    group.my_index = mine;
    for (int64_t i = 0; i < ring_size; ++i) group.axis_indices.push_back(i);
    return group;
  }
  for (const ir::AxisIndexGroup& g : groups) {
    for (int k = 0; k < g.indices_size(); ++k) {
      if (g.indices(k) != mine) continue;
      for (int64_t index : g.indices()) {
        if (index < 0 || index >= ring_size) {
          return absl::InvalidArgumentError(
              fmt::format("axis_index_groups index {} is out of range", index));
        }
        group.members.push_back(ring[index]);
        group.axis_indices.push_back(index);
      }
      group.my_index = k;
      return group;
    }
  }
  return absl::InvalidArgumentError(
      fmt::format("axis index {} is in no axis_index_groups entry", mine));
}

const AxisNames& CollectiveAxes(const ir::Op& op) {
  switch (op.attrs_case()) {
    case ir::Op::kAllReduce:
      return op.all_reduce().axes();
    case ir::Op::kAllGather:
      return op.all_gather().axes();
    case ir::Op::kPsumScatter:
      return op.psum_scatter().axes();
    case ir::Op::kPpermute:
      return op.ppermute().axes();
    case ir::Op::kAllToAll:
      return op.all_to_all().axes();
    case ir::Op::kPbroadcast:
      return op.pbroadcast().axes();
    case ir::Op::kRaggedAllToAll:
      return op.ragged_all_to_all().axes();
    case ir::Op::kPrecv:
      return op.precv().axes();
    default:
      return op.axis().axes();
  }
}

const AxisGroups& CollectiveGroups(const ir::Op& op) {
  static const auto* empty = new AxisGroups();
  switch (op.attrs_case()) {
    case ir::Op::kAllReduce:
      return op.all_reduce().axis_index_groups();
    case ir::Op::kAllGather:
      return op.all_gather().axis_index_groups();
    case ir::Op::kPsumScatter:
      return op.psum_scatter().axis_index_groups();
    case ir::Op::kAllToAll:
      return op.all_to_all().axis_index_groups();
    case ir::Op::kRaggedAllToAll:
      return op.ragged_all_to_all().axis_index_groups();
    default:
      return *empty;
  }
}

}  // namespace shardjit::runtime
