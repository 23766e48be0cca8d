// Shape rules of the primitives that order or scan along a dimension: sort, top_k, argmax,
// argmin, and the cumulative reductions cumsum, cumprod, cummax, cummin (jax.lax semantics).
#include "base/status_macros.h"
#include "ir/prims/ad_rules.h"
#include "ir/prims/rule_util.h"

namespace shardjit::ir::prims {
namespace {

absl::Status CheckAxis(const Op& op, const Types& operands, std::string_view attr, int64_t axis,
                       int64_t rank) {
  if (axis < 0 || axis >= rank) {
    return RuleError(op, operands, "{}={} is out of range for rank {}", attr, axis, rank);
  }
  return absl::OkStatus();
}

// sort: operands of one shape (any dtypes), sorted together along `dimension` by the first
// num_keys of them.
absl::StatusOr<Types> Sort(const ShapeContext&, const Types& operands, const Op& op) {
  const SortAttrs& a = op.sort();
  for (size_t i = 1; i < operands.size(); ++i) {
    if (operands[i].dims != operands[0].dims) {
      return RuleError(op, operands, "operand shapes differ ({} vs {})", operands[0].ToString(),
                       operands[i].ToString());
    }
  }
  if (a.num_keys() < 1 || a.num_keys() > static_cast<int64_t>(operands.size())) {
    return RuleError(op, operands, "num_keys={} must be in [1, {}] (the number of operands)",
                     a.num_keys(), operands.size());
  }
  RETURN_IF_ERROR(CheckAxis(op, operands, "dimension", a.dimension(), operands[0].rank()));
  return operands;
}

// top_k: the k largest along `axis`, and their s32 indices.
absl::StatusOr<Types> TopK(const ShapeContext&, const Types& operands, const Op& op) {
  const TopKAttrs& a = op.top_k();
  const ShapedType& x = operands[0];
  RETURN_IF_ERROR(CheckAxis(op, operands, "axis", a.axis(), x.rank()));
  if (a.k() < 0) return RuleError(op, operands, "k={} must be nonnegative", a.k());
  if (a.k() > x.dims[a.axis()]) {
    return RuleError(op, operands, "k={} is larger than dimension {} (size {})", a.k(), a.axis(),
                     x.dims[a.axis()]);
  }
  if (x.dims[a.axis()] - 1 > 2147483647) {
    return RuleError(op, operands, "dimension {} (size {}) has indices that do not fit s32",
                     a.axis(), x.dims[a.axis()]);
  }
  ShapedType values = x;
  values.dims[a.axis()] = a.k();
  return Types{values, {DType::kS32, values.dims}};
}

// argmax / argmin: the operand's shape without `axis`, in index_dtype.
absl::StatusOr<Types> ArgMinMax(const ShapeContext&, const Types& operands, const Op& op) {
  const ArgMinMaxAttrs& a = op.arg_min_max();
  const ShapedType& x = operands[0];
  RETURN_IF_ERROR(CheckAxis(op, operands, "axis", a.axis(), x.rank()));
  if (x.dims[a.axis()] < 1) {
    return RuleError(op, operands, "the reduced dimension {} is empty (argmin and argmax need a "
                     "non-empty dimension)", a.axis());
  }
  RETURN_IF_ERROR(CheckDTypeAttr(op, operands, "index_dtype", a.index_dtype()));
  const DType index = FromProto(a.index_dtype());
  if (!IsInteger(index)) {
    return RuleError(op, operands, "index_dtype={} must be an integer dtype", DTypeName(index));
  }
  const std::optional<IntegerBounds> range = IntegerRange(index);
  if (static_cast<double>(x.dims[a.axis()] - 1) >= range->end) {
    return RuleError(op, operands, "dimension {} (size {}) has indices that do not fit {} (range "
                     "{})", a.axis(), x.dims[a.axis()], DTypeName(index), range->text);
  }
  ShapedType out{index, {}};
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d != a.axis()) out.dims.push_back(x.dims[d]);
  }
  return Types{out};
}

// cumsum / cumprod / cummax / cummin: numeric operands, the same type out.
absl::StatusOr<Types> Cumulative(const ShapeContext&, const Types& operands, const Op& op) {
  const ShapedType& x = operands[0];
  if (x.dtype == DType::kPred) {
    return RuleError(op, operands, "the operand must be numeric, got pred");
  }
  RETURN_IF_ERROR(CheckAxis(op, operands, "axis", op.cumulative().axis(), x.rank()));
  return operands;
}

// Registers a sorting primitive with its differentiation rules, IndexingAd(name).
void RegisterSorting(Primitive primitive) {
  primitive.ad = IndexingAd(primitive.name);
  RegisterPrimitive(std::move(primitive));
}

const bool registered = [] {
  RegisterSorting({"sort", PrimitiveKind::kStructural, 1, -1, Op::kSort, Sort});
  RegisterSorting({"top_k", PrimitiveKind::kStructural, 1, 1, Op::kTopK, TopK});
  for (const char* name : {"argmax", "argmin"}) {
    RegisterSorting({name, PrimitiveKind::kStructural, 1, 1, Op::kArgMinMax, ArgMinMax});
  }
  for (const char* name : {"cumsum", "cumprod", "cummax", "cummin"}) {
    RegisterSorting({name, PrimitiveKind::kStructural, 1, 1, Op::kCumulative, Cumulative});
  }
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
