// BroadcastRowsOf: which broadcasts a loop over rows of the result reads with one pointer per
// row, and the split into rows each needs.
#include "ir/broadcast_rows.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace shardjit::ir {
namespace {

using Dims = std::vector<int64_t>;

std::optional<BroadcastRows> Rows(const Dims& operand, const Dims& result, const Dims& dims) {
  return BroadcastRowsOf(operand, result, dims);
}

void ExpectRows(const Dims& operand, const Dims& result, const Dims& dims, BroadcastLayout layout,
                int split) {
  std::optional<BroadcastRows> rows = Rows(operand, result, dims);
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->layout, layout);
  EXPECT_EQ(rows->split, split);
}

TEST(BroadcastRowsOf, ScalarsWholeRowsAndColumns) {
  ExpectRows({}, {2, 3}, {}, BroadcastLayout::kScalar, -1);
  ExpectRows({1, 1}, {4, 8}, {0, 1}, BroadcastLayout::kScalar, -1);
  // Unit dimensions added or expanded from 1 to 1 keep the order of the elements.
  ExpectRows({2, 512}, {2, 1, 512}, {0, 2}, BroadcastLayout::kWhole, -1);
  ExpectRows({2, 1, 5}, {2, 1, 5}, {0, 1, 2}, BroadcastLayout::kWhole, -1);
  // Softmax's row maximum: one element per row of the last dimension.
  ExpectRows({2, 4, 512}, {2, 4, 512, 512}, {0, 1, 2}, BroadcastLayout::kPerRow, 3);
  ExpectRows({8}, {8, 1, 16}, {0}, BroadcastLayout::kPerRow, 1);
  // A mask shared by every batch and head; a bias over the rows of a batch.
  ExpectRows({512, 512}, {2, 4, 512, 512}, {2, 3}, BroadcastLayout::kPerColumn, 2);
  ExpectRows({1024}, {8, 512, 1024}, {2}, BroadcastLayout::kPerColumn, 2);
  // Unit dimensions of the result do not count in the split.
  ExpectRows({1024}, {8, 1, 1024}, {2}, BroadcastLayout::kPerColumn, 1);
  ExpectRows({1, 1024}, {8, 1024}, {0, 1}, BroadcastLayout::kPerColumn, 1);
}

TEST(BroadcastRowsOf, NoneForMiddleDimensionsTransposesOrBadDimensions) {
  EXPECT_FALSE(Rows({512, 32}, {2, 512, 4, 32}, {1, 3}).has_value());  // a gap
  EXPECT_FALSE(Rows({4}, {2, 4, 8}, {1}).has_value());                 // middle only
  EXPECT_FALSE(Rows({3, 2}, {2, 3}, {1, 0}).has_value());              // transposes
  EXPECT_FALSE(Rows({2, 1, 5}, {2, 3, 5}, {0, 1, 2}).has_value());     // varies around dim 1
  EXPECT_FALSE(Rows({4}, {4}, {1}).has_value());                       // out of range
  EXPECT_FALSE(Rows({4}, {4}, {}).has_value());                        // one per operand dim
}

TEST(RowsOf, LeadingNonUnitDimensions) {
  EXPECT_EQ(RowsOf({2, 1, 4, 512}, 2), 8);
  EXPECT_EQ(RowsOf({2, 1, 4, 512}, 3), 4096);
  EXPECT_EQ(RowsOf({2, 4, 512}, 0), 1);
  EXPECT_EQ(RowsOf({2, 4, 512}, -1), 1);
}

}  // namespace
}  // namespace shardjit::ir
