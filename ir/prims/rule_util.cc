#include "ir/prims/rule_util.h"

#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "ir/collective_groups.h"

namespace shardjit::ir::prims {

namespace {

bool DTypeAccepted(DType d, ElementwiseDTypes dtypes) {
  switch (dtypes) {
    case ElementwiseDTypes::kNumeric:
      return IsFloating(d) || d == DType::kS32;
    case ElementwiseDTypes::kFloating:
      return IsFloating(d);
    case ElementwiseDTypes::kInteger:
      return d == DType::kS32;
    case ElementwiseDTypes::kIntegerOrPred:
      return d == DType::kS32 || d == DType::kPred;
  }
  return false;
}

std::string_view AcceptedName(ElementwiseDTypes dtypes) {
  switch (dtypes) {
    case ElementwiseDTypes::kNumeric:
      return "a numeric dtype";
    case ElementwiseDTypes::kFloating:
      return "a floating dtype";
    case ElementwiseDTypes::kInteger:
      return "an integer dtype";
    case ElementwiseDTypes::kIntegerOrPred:
      return "an integer or pred dtype";
  }
  return "";
}

}  // namespace

absl::Status CheckSameTypes(const Op& op, const Types& operands, size_t first) {
  for (size_t i = first + 1; i < operands.size(); ++i) {
    if (operands[i] != operands[first]) {
      return RuleError(op, operands, "operand types differ ({} vs {})",
                       operands[first].ToString(), operands[i].ToString());
    }
  }
  return absl::OkStatus();
}

void RegisterElementwise(std::string name, int arity, ElementwiseDTypes dtypes, bool pred_result,
                         Op::AttrsCase attrs_case, AttrCheck check_attrs) {
  RegisterPrimitive({
      .name = std::move(name),
      .kind = PrimitiveKind::kElementwise,
      .min_operands = arity,
      .max_operands = arity,
      .attrs_case = attrs_case,
      .shape_rule = [dtypes, pred_result, check_attrs = std::move(check_attrs)](
                        const ShapeContext&, const Types& operands,
                        const Op& op) -> absl::StatusOr<Types> {
        RETURN_IF_ERROR(CheckSameTypes(op, operands, 0));
        if (!DTypeAccepted(operands[0].dtype, dtypes)) {
          return RuleError(op, operands, "needs {}, got {}", AcceptedName(dtypes),
                           DTypeName(operands[0].dtype));
        }
        if (check_attrs) RETURN_IF_ERROR(check_attrs(op, operands));
        if (pred_result) return Types{{DType::kPred, operands[0].dims}};
        return Types{operands[0]};
      },
  });
}

absl::Status CheckDimList(const Op& op, const Types& operands, std::string_view attr,
                          const std::vector<int64_t>& dims, int64_t rank) {
  std::set<int64_t> seen;
  for (int64_t d : dims) {
    if (d < 0 || d >= rank) {
      return RuleError(op, operands, "{} entry {} is out of range for rank {}", attr, d, rank);
    }
    if (!seen.insert(d).second) {
      return RuleError(op, operands, "{} repeats dimension {}", attr, d);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDTypeAttr(const Op& op, const Types& operands, std::string_view attr,
                            DTypeProto dtype, bool unset_ok) {
  if (dtype == DTYPE_INVALID) {
    return unset_ok ? absl::OkStatus() : RuleError(op, operands, "{} is not set", attr);
  }
  if (!DTypeProto_IsValid(dtype)) {
    return RuleError(op, operands, "{}={} is not a known dtype (f32, bf16, s32 or pred)", attr,
                     static_cast<int>(dtype));
  }
  return absl::OkStatus();
}

bool FitsS32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

absl::Status CheckLiteralFits(const Op& op, const Types& operands, std::string_view attr,
                              double value, DType dtype) {
  bool fits = true;
  switch (dtype) {
    case DType::kS32: {
      // What Tensor::SetDouble's static_cast keeps defined (nan fails both comparisons).
      const double t = std::trunc(value);
      fits = t >= -2147483648.0 && t <= 2147483647.0;
      break;
    }
    case DType::kF32:
    case DType::kBF16: {
      if (!std::isfinite(value)) break;  // inf and nan are values of both
      // Past 2^128 every double rounds to inf in f32; below it the cast is exact IEEE rounding.
      if (std::fabs(value) >= 0x1p128) {
        fits = false;
        break;
      }
      float f = static_cast<float>(value);
      if (dtype == DType::kBF16) f = static_cast<float>(bf16(f));
      fits = std::isfinite(f);
      break;
    }
    case DType::kPred:
    case DType::kInvalid:
      break;
  }
  if (fits) return absl::OkStatus();
  if (dtype == DType::kS32) {
    return RuleError(op, operands, "{}={} does not fit s32 (range [-2147483648, 2147483647])",
                     attr, value);
  }
  return RuleError(op, operands, "{}={} does not fit {} (it rounds to inf; the largest finite "
                   "{} is {})",
                   attr, value, DTypeName(dtype), DTypeName(dtype),
                   dtype == DType::kF32 ? static_cast<double>(std::numeric_limits<float>::max())
                                        : static_cast<double>(bf16::ToFloat(0x7f7f)));
}

std::vector<int64_t> ToVector(const google::protobuf::RepeatedField<int64_t>& f) {
  return {f.begin(), f.end()};
}

absl::StatusOr<int64_t> CollectiveAxisSize(const ShapeContext& ctx, const Op& op,
                                           const Types& operands) {
  const AxisList axes = CollectiveAxes(op);
  if (axes.empty()) return RuleError(op, operands, "needs at least one axis name");
  static const Mesh* const no_mesh = new Mesh();
  absl::StatusOr<int64_t> size = CombinedAxisSize(ctx.mesh ? *ctx.mesh : *no_mesh, axes);
  if (!size.ok()) return RuleError(op, operands, "{}", size.status().message());
  return size;
}

absl::StatusOr<int64_t> CollectiveGroupSize(const Op& op, const Types& operands, int64_t axis_size,
                                            bool equal_sizes) {
  absl::StatusOr<int64_t> size =
      CheckAxisIndexGroups(CollectiveAxisGroups(op), axis_size, equal_sizes);
  if (!size.ok()) return RuleError(op, operands, "{}", size.status().message());
  return size;
}

}  // namespace shardjit::ir::prims
