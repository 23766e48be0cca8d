// Bounds of s32 values known at compile time (interval arithmetic): a constant, an axis_index
// (0 .. size - 1), a fori_loop's index (lower .. upper - 1) and the arithmetic on them. Used to
// drop the wrap of negative start indices (select(i < 0, i + d, i)) when i cannot be negative,
// so dynamic_slice starts keep the forms later passes recognise (axis_index * size).
#ifndef SHARDJIT_PASSES_INT_RANGE_H_
#define SHARDJIT_PASSES_INT_RANGE_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "ir/ir.pb.h"

namespace shardjit::passes {

// Every element of a value lies in [lo, hi].
struct IntRange {
  int64_t lo = 0;
  int64_t hi = 0;
};

// The range of `op`'s (single, s32) result given its operands' ranges (nullopt where unknown);
// nullopt when the op's result is not s32, the op is not one the analysis knows, or the bound
// would overflow s32 (s32 arithmetic wraps, so the interval would be wrong).
std::optional<IntRange> ResultRange(
    const ir::Mesh& mesh, const ir::Op& op,
    const std::function<std::optional<IntRange>(int64_t id)>& operand_range);

// The value of compare `op` when its operands' ranges decide it for every element.
std::optional<bool> DecidedComparison(const ir::Op& op, const std::optional<IntRange>& lhs,
                                      const std::optional<IntRange>& rhs);

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_INT_RANGE_H_
