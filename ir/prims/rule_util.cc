#include "ir/prims/rule_util.h"

#include "ir/prims/ad_rules.h"

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
      return IsFloating(d) || IsInteger(d);
    case ElementwiseDTypes::kFloating:
      return IsFloating(d);
    case ElementwiseDTypes::kInteger:
      return IsInteger(d);
    case ElementwiseDTypes::kIntegerOrPred:
      return IsInteger(d) || d == DType::kPred;
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
  AdRules ad = ElementwiseAd(name);
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
      .ad = std::move(ad),
  });
}

void RegisterStructural(Primitive primitive) {
  primitive.ad = StructuralAd(primitive.name);
  RegisterPrimitive(std::move(primitive));
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
    return RuleError(op, operands,
                     "{}={} is not a known dtype (one of f32, bf16, f16, f64, s8, s16, s32, s64, "
                     "u8, u16, u32, u64, pred)",
                     attr, static_cast<int>(dtype));
  }
  return absl::OkStatus();
}

bool FitsS32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

std::optional<IntegerBounds> IntegerRange(DType dtype) {
  if (!IsInteger(dtype)) return std::nullopt;
  const int bits = static_cast<int>(DTypeSize(dtype) * 8);
  if (IsUnsignedInteger(dtype)) {
    return IntegerBounds{0.0, std::ldexp(1.0, bits),
                         fmt::format("[0, {}]", ~uint64_t{0} >> (64 - bits))};
  }
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return IntegerBounds{-std::ldexp(1.0, bits - 1), std::ldexp(1.0, bits - 1),
                       fmt::format("[{}, {}]", kMin >> (64 - bits), kMax >> (64 - bits))};
}

absl::Status CheckLiteralFits(const Op& op, const Types& operands, std::string_view attr,
                              double value, DType dtype) {
  if (auto range = IntegerRange(dtype)) {
    // What Tensor::SetDouble's static_cast keeps defined (nan fails both comparisons).
    const double t = std::trunc(value);
    if (t >= range->lo && t < range->end) return absl::OkStatus();
    return RuleError(op, operands, "{}={} does not fit {} (range {})", attr, value,
                     DTypeName(dtype), range->text);
  }
  if (!IsFloating(dtype) || dtype == DType::kF64 || !std::isfinite(value)) {
    return absl::OkStatus();  // inf and nan are values of every float type
  }
  double largest = std::numeric_limits<float>::max();
  bool fits = std::fabs(value) < 0x1p128;  // past 2^128 every double rounds to inf in f32
  if (fits) {
    const float f = static_cast<float>(value);
    if (dtype == DType::kBF16) {
      largest = bf16::ToFloat(0x7f7f);
      fits = std::isfinite(static_cast<float>(bf16(f)));
    } else if (dtype == DType::kF16) {
      largest = f16::ToFloat(0x7bff);
      fits = std::isfinite(static_cast<float>(f16(value)));
    } else {
      fits = std::isfinite(f);
    }
  }
  if (fits) return absl::OkStatus();
  return RuleError(op, operands, "{}={} does not fit {} (it rounds to inf; the largest finite "
                   "{} is {})",
                   attr, value, DTypeName(dtype), DTypeName(dtype), largest);
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

absl::Status CheckRegionParams(const Op& op, const Types& operands, const Region& region,
                               std::string_view name, const Types& types) {
  if (region.params_size() != static_cast<int>(types.size())) {
    return RuleError(op, operands, "{} takes {} params; expected {} ({})", name,
                     region.params_size(), types.size(), TypesToString(types));
  }
  for (size_t i = 0; i < types.size(); ++i) {
    const ShapedType param = FromProto(region.params(i).type());
    if (param != types[i]) {
      return RuleError(op, operands, "{} param {} is {}, expected {}", name, i, param.ToString(),
                       types[i].ToString());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Types> RegionResultTypes(const ShapeContext& ctx, const Op& op,
                                        const Types& operands, const Region& region) {
  if (!ctx.value_type) return RuleError(op, operands, "region results cannot be typed here");
  Types out;
  for (int64_t id : region.results()) {
    ASSIGN_OR_RETURN(ShapedType t, ctx.value_type(id));
    out.push_back(t);
  }
  return out;
}

}  // namespace shardjit::ir::prims
