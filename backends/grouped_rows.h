// The row ranges of a grouped matmul's groups (gmm / tgmm, ir/prims/grouped_matmul.cc), read from
// its group_sizes and group_offset operands and checked: the one place both backends get them.
#ifndef SHARDJIT_BACKENDS_GROUPED_ROWS_H_
#define SHARDJIT_BACKENDS_GROUPED_ROWS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends {

struct GroupedRows {
  // Local group i (global group first_group + i) is rows [starts[i], starts[i + 1]).
  std::vector<int64_t> starts;
  int64_t first_group = 0;
  int64_t local_groups() const { return static_cast<int64_t>(starts.size()) - 1; }
  int64_t rows(int64_t i) const { return starts[i + 1] - starts[i]; }
};

// For `op` (gmm or tgmm) with `operands` (group_sizes at 2, group_offset at 3 when present): the
// ranges of its `local_groups` groups among `m` rows. InvalidArgument naming the op and the value
// at fault for a negative size, sizes summing past m, or a group_offset with which the local
// groups do not fit in group_sizes.
absl::StatusOr<GroupedRows> ReadGroupedRows(const ir::Op& op,
                                            const std::vector<ir::Tensor>& operands, int64_t m,
                                            int64_t local_groups);

}  // namespace shardjit::backends

#endif  // SHARDJIT_BACKENDS_GROUPED_ROWS_H_
