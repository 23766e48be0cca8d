// How a broadcast_in_dim's operand lines up with its result read as rows: the result (row-major)
// as `rows` rows of contiguous elements, split after its first `split` dimensions of size other
// than 1. A loop over such rows reads each operand with one pointer per row: the fusion pass
// fuses broadcasts of these forms, and the x86 fused loops run them.
#ifndef SHARDJIT_IR_BROADCAST_ROWS_H_
#define SHARDJIT_IR_BROADCAST_ROWS_H_

#include <cstdint>
#include <optional>

#include "absl/types/span.h"
#include "ir/ir.pb.h"

namespace shardjit::ir {

enum class BroadcastLayout {
  kScalar,     // one element, the same everywhere
  kWhole,      // the result's elements in order (only unit dimensions added or expanded)
  kPerRow,     // one element per row: varies along the leading dimensions only
  kPerColumn,  // one row's elements, the same in every row: varies along the trailing ones only
};

struct BroadcastRows {
  BroadcastLayout layout = BroadcastLayout::kScalar;
  int split = -1;  // kPerRow and kPerColumn: the split they need; -1: any
};

// The layout of a broadcast of `operand_dims` to `result_dims` along `broadcast_dimensions`;
// nullopt when none fits (a broadcast that transposes, or varies along middle dimensions only).
std::optional<BroadcastRows> BroadcastRowsOf(absl::Span<const int64_t> operand_dims,
                                             absl::Span<const int64_t> result_dims,
                                             absl::Span<const int64_t> broadcast_dimensions);

// The same for `broadcast`, a broadcast_in_dim op, whose operand has type `operand`.
std::optional<BroadcastRows> BroadcastRowsOf(const Op& broadcast, const TensorType& operand);

// The rows of `dims` split after its first `split` dimensions of size other than 1 (-1: one
// row).
int64_t RowsOf(absl::Span<const int64_t> dims, int split);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_BROADCAST_ROWS_H_
