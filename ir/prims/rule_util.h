// Helpers shared by the shape rules in ir/prims/.
#ifndef SHARDJIT_IR_PRIMS_RULE_UTIL_H_
#define SHARDJIT_IR_PRIMS_RULE_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/primitive.h"

namespace shardjit::ir::prims {

using Types = std::vector<ShapedType>;

// "<opcode>: <message>; operands <types>".
template <typename... Args>
absl::Status RuleError(const Op& op, const Types& operands, fmt::format_string<Args...> f,
                       Args&&... args) {
  return absl::InvalidArgumentError(fmt::format("{}: {}; operands {}", op.opcode(),
                                                fmt::format(f, std::forward<Args>(args)...),
                                                TypesToString(operands)));
}

// Checks that every entry of `dims` is a distinct dimension index below `rank`.
absl::Status CheckDimList(const Op& op, const Types& operands, std::string_view attr,
                          const std::vector<int64_t>& dims, int64_t rank);

std::vector<int64_t> ToVector(const google::protobuf::RepeatedField<int64_t>& f);

// Size of the (combined) mesh axes named by `axes`; errors for unknown or repeated names.
absl::StatusOr<int64_t> CombinedAxisSize(const ShapeContext& ctx, const Op& op,
                                         const Types& operands,
                                         const google::protobuf::RepeatedPtrField<std::string>& axes);

// Validates axis_index_groups against the combined axis size (every index in exactly one
// non-empty group; with `equal_sizes`, all groups of one size) and returns the size of the first
// group (the axis size when there are no groups).
absl::StatusOr<int64_t> GroupSize(const Op& op, const Types& operands, int64_t axis_size,
                                  const google::protobuf::RepeatedPtrField<AxisIndexGroup>& groups,
                                  bool equal_sizes);

}  // namespace shardjit::ir::prims

#endif  // SHARDJIT_IR_PRIMS_RULE_UTIL_H_
