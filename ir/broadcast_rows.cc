#include "ir/broadcast_rows.h"

#include <vector>

namespace shardjit::ir {

std::optional<BroadcastRows> BroadcastRowsOf(absl::Span<const int64_t> operand_dims,
                                             absl::Span<const int64_t> result_dims,
                                             absl::Span<const int64_t> broadcast_dimensions) {
  if (operand_dims.size() != broadcast_dimensions.size()) return std::nullopt;
  // Positions among the result's non-unit dimensions.
  std::vector<int> position(result_dims.size(), -1);
  int non_unit = 0;
  for (size_t d = 0; d < result_dims.size(); ++d) {
    if (result_dims[d] != 1) position[d] = non_unit++;
  }
  // The positions the operand varies along, in its own order: they must increase.
  std::vector<int> varies;
  for (size_t i = 0; i < operand_dims.size(); ++i) {
    const int64_t d = broadcast_dimensions[i];
    if (d < 0 || d >= static_cast<int64_t>(result_dims.size())) return std::nullopt;
    if (operand_dims[i] == 1 || position[d] < 0) continue;
    if (!varies.empty() && position[d] <= varies.back()) return std::nullopt;
    varies.push_back(position[d]);
  }
  const int count = static_cast<int>(varies.size());
  if (count == 0) return BroadcastRows{BroadcastLayout::kScalar, -1};
  for (int i = 1; i < count; ++i) {
    if (varies[i] != varies[i - 1] + 1) return std::nullopt;  // a gap: not contiguous
  }
  if (count == non_unit) return BroadcastRows{BroadcastLayout::kWhole, -1};
  if (varies.front() == 0) return BroadcastRows{BroadcastLayout::kPerRow, count};
  if (varies.back() == non_unit - 1) return BroadcastRows{BroadcastLayout::kPerColumn, varies[0]};
  return std::nullopt;
}

std::optional<BroadcastRows> BroadcastRowsOf(const Op& broadcast, const TensorType& operand) {
  const auto& dims = broadcast.broadcast_in_dim().broadcast_dimensions();
  const auto& result = broadcast.result_types(0).dims();
  return BroadcastRowsOf({operand.dims().data(), static_cast<size_t>(operand.dims_size())},
                         {result.data(), static_cast<size_t>(result.size())},
                         {dims.data(), static_cast<size_t>(dims.size())});
}

int64_t RowsOf(absl::Span<const int64_t> dims, int split) {
  int64_t rows = 1;
  int seen = 0;
  for (int64_t d : dims) {
    if (seen >= split) break;
    if (d == 1) continue;
    rows *= d;
    ++seen;
  }
  return rows;
}

}  // namespace shardjit::ir
