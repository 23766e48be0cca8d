// Which devices take part in a collective with a given device: the devices that differ from it
// only along the named mesh axes (indexed x*size(y)+y for axes (x, y), as JAX does), narrowed
// to its axis_index_groups entry when groups are given.
#ifndef SHARDJIT_RUNTIME_COLLECTIVE_GROUPS_H_
#define SHARDJIT_RUNTIME_COLLECTIVE_GROUPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/repeated_field.h"
#include "ir/ir.pb.h"

namespace shardjit::runtime {

struct CollectiveGroup {
  // Mesh positions of the members, in group order (the order results are concatenated in).
  std::vector<int64_t> members;
  // This device's index in `members`.
  int64_t my_index = 0;
  // The combined axis index of each member (the indices perm and groups refer to).
  std::vector<int64_t> axis_indices;
};

using AxisNames = google::protobuf::RepeatedPtrField<std::string>;
using AxisGroups = google::protobuf::RepeatedPtrField<ir::AxisIndexGroup>;

// The combined index of mesh position `position` along `axes`.
int64_t CombinedAxisIndex(const ir::Mesh& mesh, int64_t position, const AxisNames& axes);

// The group of mesh position `position` for a collective over `axes` with `groups` (may be
// empty: the whole axis ring).
absl::StatusOr<CollectiveGroup> GroupOf(const ir::Mesh& mesh, int64_t position,
                                        const AxisNames& axes, const AxisGroups& groups);

// Axis names and groups of a collective op (empty groups for ppermute).
const AxisNames& CollectiveAxes(const ir::Op& op);
const AxisGroups& CollectiveGroups(const ir::Op& op);

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_COLLECTIVE_GROUPS_H_
