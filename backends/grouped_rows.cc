#include "backends/grouped_rows.h"

#include "absl/status/status.h"
#include "fmt/format.h"

namespace shardjit::backends {

absl::StatusOr<GroupedRows> ReadGroupedRows(const ir::Op& op,
                                            const std::vector<ir::Tensor>& operands, int64_t m,
                                            int64_t local_groups) {
  const ir::Tensor& sizes = operands[2];
  const int64_t groups = sizes.num_elements();
  const int32_t* size = sizes.data_as<int32_t>();
  const int64_t offset = operands.size() > 3 ? operands[3].data_as<int32_t>()[0] : 0;
  if (offset < 0 || offset + local_groups > groups) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: group_offset {} with {} local groups is out of range for {} groups in group_sizes",
        op.opcode(), offset, local_groups, groups));
  }
  GroupedRows rows;
  rows.first_group = offset;
  rows.starts.reserve(local_groups + 1);
  int64_t end = 0;
  for (int64_t g = 0; g < groups; ++g) {
    if (size[g] < 0) {
      return absl::InvalidArgumentError(
          fmt::format("{}: group_sizes[{}] is negative ({})", op.opcode(), g, size[g]));
    }
    if (g == offset) rows.starts.push_back(end);
    end += size[g];
    if (end > m) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: group_sizes[0..{}] sum to {}, past the {} rows of lhs", op.opcode(), g, end, m));
    }
    if (g >= offset && g < offset + local_groups) rows.starts.push_back(end);
  }
  return rows;
}

}  // namespace shardjit::backends
