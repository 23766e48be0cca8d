// Helpers shared by the shape rules in ir/prims/.
#ifndef SHARDJIT_IR_PRIMS_RULE_UTIL_H_
#define SHARDJIT_IR_PRIMS_RULE_UTIL_H_

#include <functional>
#include <optional>
#include <string>
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

// Checks a dtype attribute: RuleError "<attr> is not set" for DTYPE_INVALID (unless
// `unset_ok`), and "<attr>=<n> is not a known dtype" for a number DTypeProto does not define (a
// binary or text proto can carry one; the IR text form cannot).
absl::Status CheckDTypeAttr(const Op& op, const Types& operands, std::string_view attr,
                            DTypeProto dtype, bool unset_ok = false);

// Whether the s32 value range holds `v` (an attribute that becomes an s32 value).
bool FitsS32(int64_t v);

// The values of an integer dtype, [lo, end) as exact doubles (lo 0 or -2^(bits-1), end 2^bits or
// 2^(bits-1)), and "[lo, end - 1]" as text; nullopt for the other dtypes.
struct IntegerBounds {
  double lo;
  double end;
  std::string text;
};
std::optional<IntegerBounds> IntegerRange(DType dtype);

// Checks that literal `value` (attribute `attr`, e.g. "value[3]") becomes a value of `dtype`
// without leaving its range: for integers, after truncation toward zero, in IntegerRange (not nan
// or inf); for f16, bf16 and f32, anything but a finite value that rounds to inf; for f64 and
// pred, anything.
absl::Status CheckLiteralFits(const Op& op, const Types& operands, std::string_view attr,
                              double value, DType dtype);

// Checks that `region` (named `name` in messages: "body", "in_specs[0] index_map") takes params
// of `types`.
absl::Status CheckRegionParams(const Op& op, const Types& operands, const Region& region,
                               std::string_view name, const Types& types);

// The types of `region`'s results, through ctx.value_type.
absl::StatusOr<Types> RegionResultTypes(const ShapeContext& ctx, const Op& op,
                                        const Types& operands, const Region& region);

// Checks that operands[first..] all have one type: "operand types differ (<a> vs <b>)".
absl::Status CheckSameTypes(const Op& op, const Types& operands, size_t first);

// The dtypes an elementwise primitive accepts.
enum class ElementwiseDTypes {
  kNumeric,         // f32, bf16, s32
  kFloating,        // f32, bf16
  kInteger,         // s32
  kIntegerOrPred,   // s32, pred
};

// Registers elementwise primitive `name`: `arity` operands of one type whose dtype is among
// `dtypes`; the result has that type, or pred of the same shape with `pred_result`. `check_attrs`,
// when set, checks the op's attributes (oneof case `attrs_case`) once the operands pass.
using AttrCheck = std::function<absl::Status(const Op& op, const Types& operands)>;
// Registers an elementwise primitive with its differentiation rules, ElementwiseAd(name).
void RegisterElementwise(std::string name, int arity, ElementwiseDTypes dtypes,
                         bool pred_result = false, Op::AttrsCase attrs_case = Op::ATTRS_NOT_SET,
                         AttrCheck check_attrs = nullptr);

// Registers a structural primitive with its differentiation rules, StructuralAd(name).
void RegisterStructural(Primitive primitive);

std::vector<int64_t> ToVector(const google::protobuf::RepeatedField<int64_t>& f);

// The combined size of the mesh axes collective `op` names (ir/collective_groups.h); errors for
// none, and for unknown or repeated names.
absl::StatusOr<int64_t> CollectiveAxisSize(const ShapeContext& ctx, const Op& op,
                                           const Types& operands);

// Validates `op`'s axis_index_groups against its combined axis size (ir::CheckAxisIndexGroups)
// and returns the size of the first group (the axis size when there are no groups).
absl::StatusOr<int64_t> CollectiveGroupSize(const Op& op, const Types& operands, int64_t axis_size,
                                            bool equal_sizes);

}  // namespace shardjit::ir::prims

#endif  // SHARDJIT_IR_PRIMS_RULE_UTIL_H_
