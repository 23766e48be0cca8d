// Which devices a collective brings together: the one description of a collective's groups, used
// by the shape rules (ir/prims/collectives.cc), cost analysis (passes/cost_analysis.cc), the
// partitioner's cost model (passes/spmd/cost.cc) and the runtime (runtime/collective_plan.cc).
//
// A collective names mesh axes, major first, and optionally axis_index_groups. The devices that
// differ from a device only along the named axes are its ring; each has a combined axis index
// along the axes (ir::CombinedAxisIndex: x * size(y) + y for axes (x, y), as JAX numbers them).
// Without groups a device meets its whole ring; with them, the members of the ring whose indices
// share its group, in the group's order (the order results are concatenated in).
#ifndef SHARDJIT_IR_COLLECTIVE_GROUPS_H_
#define SHARDJIT_IR_COLLECTIVE_GROUPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/repeated_field.h"
#include "ir/ir.pb.h"
#include "ir/sharding.h"

namespace shardjit::ir {

using AxisGroups = google::protobuf::RepeatedPtrField<AxisIndexGroup>;

// The axes a collective op names (those of axis_index and axis_size included; none for an op
// that is not a collective), and its axis_index_groups (none for ppermute, psend, precv,
// pbroadcast and the axis ops). An async start has its blocking collective's attributes.
AxisList CollectiveAxes(const Op& op);
const AxisGroups& CollectiveAxisGroups(const Op& op);

// Checks axis_index_groups over combined axes of `axis_size`: no group is empty, every index in
// [0, axis_size) is in exactly one group and, with `equal_sizes`, all groups have one size.
// Returns the size of the first group (`axis_size` when there are no groups).
absl::StatusOr<int64_t> CheckAxisIndexGroups(const AxisGroups& groups, int64_t axis_size,
                                             bool equal_sizes);

struct CollectiveGroup {
  // Mesh positions of the members, in group order.
  std::vector<int64_t> members;
  // The device's index in `members`.
  int64_t my_index = 0;
  // The combined axis index of each member (the indices perm and groups refer to).
  std::vector<int64_t> axis_indices;

  int64_t size() const { return static_cast<int64_t>(members.size()); }
};

// The group mesh position `position` meets in a collective over `axes` with `groups` (none: the
// whole ring). Errors: CombinedAxisSize's, a groups index out of range, and a position whose
// index is in no group (groups are not checked further: CheckAxisIndexGroups does that).
absl::StatusOr<CollectiveGroup> GroupOf(const Mesh& mesh, int64_t position, const AxisList& axes,
                                        const AxisGroups& groups);
absl::StatusOr<CollectiveGroup> GroupOf(const Mesh& mesh, int64_t position, const Op& op);

// How many devices the group of `position` has, without listing them: the size of its group, or
// of the largest group when `position` is -1 (no device chosen) or in no group. Errors:
// CombinedAxisSize's.
absl::StatusOr<int64_t> GroupSize(const Mesh& mesh, int64_t position, const AxisList& axes,
                                  const AxisGroups& groups);
absl::StatusOr<int64_t> GroupSize(const Mesh& mesh, int64_t position, const Op& op);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_COLLECTIVE_GROUPS_H_
