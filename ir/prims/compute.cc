// Shape rules of constant, iota, reduce_sum/max/min/prod/and/or, dot_general and dot_accumulate.
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "ir/prims/rule_util.h"

namespace shardjit::ir::prims {
namespace {

absl::StatusOr<Types> Constant(const ShapeContext&, const Types& operands, const Op& op) {
  const auto& a = op.constant();
  RETURN_IF_ERROR(CheckDTypeAttr(op, operands, "dtype", a.dtype()));
  ShapedType out{FromProto(a.dtype()), ToVector(a.shape())};
  for (int64_t d : out.dims) {
    if (d < 0) return RuleError(op, operands, "shape has a negative dimension");
  }
  // Before counting elements, which could overflow int64 past the limits.
  if (absl::Status s = CheckTypeLimits(out); !s.ok()) {
    return RuleError(op, operands, "shape: {}", s.message());
  }
  if (a.value_size() != 1 && a.value_size() != out.num_elements()) {
    return RuleError(op, operands, "has {} values for shape {} ({} elements; or 1 to splat)",
                     a.value_size(), out.ToString(), out.num_elements());
  }
  for (int i = 0; i < a.value_size(); ++i) {
    RETURN_IF_ERROR(
        CheckLiteralFits(op, operands, fmt::format("value[{}]", i), a.value(i), out.dtype));
  }
  return Types{out};
}

absl::StatusOr<Types> Iota(const ShapeContext&, const Types& operands, const Op& op) {
  const auto& a = op.iota();
  RETURN_IF_ERROR(CheckDTypeAttr(op, operands, "dtype", a.dtype()));
  ShapedType out{FromProto(a.dtype()), ToVector(a.shape())};
  if (out.dtype == DType::kPred) return RuleError(op, operands, "dtype must be numeric");
  for (int64_t d : out.dims) {
    if (d < 0) return RuleError(op, operands, "shape has a negative dimension");
  }
  if (a.dimension() < 0 || a.dimension() >= out.rank()) {
    return RuleError(op, operands, "dimension {} is out of range for shape {}", a.dimension(),
                     out.ToString());
  }
  // The values are 0 .. size - 1 along `dimension` (finite in the floats at any size the type
  // limits allow; an integer type holds them only up to its maximum).
  const int64_t size = out.dims[a.dimension()];
  const auto range = IntegerRange(out.dtype);
  if (range && size > 0 && static_cast<double>(size - 1) >= range->end) {
    return RuleError(op, operands,
                     "shape[{}]={} (dimension={}) makes values up to {}, which do not fit {}",
                     a.dimension(), size, a.dimension(), size - 1, DTypeName(out.dtype));
  }
  return Types{out};
}

absl::StatusOr<Types> Reduce(const ShapeContext&, const Types& operands, const Op& op) {
  const ShapedType& x = operands[0];
  std::vector<int64_t> axes = ToVector(op.reduce().axes());
  RETURN_IF_ERROR(CheckDimList(op, operands, "axes", axes, x.rank()));
  const Prim prim = PrimOf(op);
  if (x.dtype == DType::kPred && (prim == Prim::kReduceSum || prim == Prim::kReduceProd)) {
    return RuleError(op, operands, "the operand must be numeric, got pred");
  }
  if (IsFloating(x.dtype) && (prim == Prim::kReduceAnd || prim == Prim::kReduceOr)) {
    return RuleError(op, operands, "the operand must be pred or an integer, got {}",
                     DTypeName(x.dtype));
  }
  ShapedType out{x.dtype, {}};
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) out.dims.push_back(x.dims[i]);
  }
  return Types{out};
}

absl::StatusOr<Types> DotGeneral(const ShapeContext&, const Types& operands, const Op& op) {
  const auto& a = op.dot_general();
  const ShapedType& lhs = operands[0];
  const ShapedType& rhs = operands[1];
  std::vector<int64_t> lc = ToVector(a.lhs_contracting_dims());
  std::vector<int64_t> rc = ToVector(a.rhs_contracting_dims());
  std::vector<int64_t> lb = ToVector(a.lhs_batch_dims());
  std::vector<int64_t> rb = ToVector(a.rhs_batch_dims());
  if (lhs.dtype != rhs.dtype) {
    return RuleError(op, operands, "operand dtypes differ ({} vs {})", DTypeName(lhs.dtype),
                     DTypeName(rhs.dtype));
  }
  if (lhs.dtype == DType::kPred) return RuleError(op, operands, "operands must be numeric");
  if (lc.size() != rc.size()) {
    return RuleError(op, operands, "contracting dims ({}) and ({}) differ in count",
                     absl::StrJoin(lc, ","), absl::StrJoin(rc, ","));
  }
  if (lb.size() != rb.size()) {
    return RuleError(op, operands, "batch dims ({}) and ({}) differ in count",
                     absl::StrJoin(lb, ","), absl::StrJoin(rb, ","));
  }
  std::vector<int64_t> lall = lb, rall = rb;
  lall.insert(lall.end(), lc.begin(), lc.end());
  rall.insert(rall.end(), rc.begin(), rc.end());
  RETURN_IF_ERROR(CheckDimList(op, operands, "lhs batch+contracting dims", lall, lhs.rank()));
  RETURN_IF_ERROR(CheckDimList(op, operands, "rhs batch+contracting dims", rall, rhs.rank()));
  for (size_t i = 0; i < lall.size(); ++i) {
    if (lhs.dims[lall[i]] != rhs.dims[rall[i]]) {
      return RuleError(op, operands,
                       "{} dim sizes differ: lhs dim {} is {}, rhs dim {} is {}",
                       i < lb.size() ? "batch" : "contracting", lall[i], lhs.dims[lall[i]],
                       rall[i], rhs.dims[rall[i]]);
    }
  }
  RETURN_IF_ERROR(CheckDTypeAttr(op, operands, "preferred_element_type", a.preferred_element_type(),
                                 /*unset_ok=*/true));
  DType out_dtype = a.preferred_element_type() == DTYPE_INVALID
                        ? lhs.dtype
                        : FromProto(a.preferred_element_type());
  if (out_dtype == DType::kPred) return RuleError(op, operands, "bad preferred_element_type");
  // jax.lax's combinations: (integral, integral) of the same signedness or unsigned to signed,
  // (integral, floating), (floating, floating); never narrower than the operands.
  if (IsFloating(lhs.dtype) && !IsFloating(out_dtype)) {
    return RuleError(op, operands,
                     "preferred_element_type={} is incompatible with the operands' {} (the "
                     "combinations are integral->integral, integral->floating and "
                     "floating->floating)",
                     DTypeName(out_dtype), DTypeName(lhs.dtype));
  }
  if (IsSignedInteger(lhs.dtype) && IsUnsignedInteger(out_dtype)) {
    return RuleError(op, operands,
                     "preferred_element_type={} must have the same signedness as the operands' {}",
                     DTypeName(out_dtype), DTypeName(lhs.dtype));
  }
  if (DTypeSize(out_dtype) < DTypeSize(lhs.dtype)) {
    return RuleError(op, operands,
                     "preferred_element_type={} must not be narrower than the operands' {}",
                     DTypeName(out_dtype), DTypeName(lhs.dtype));
  }
  ShapedType out{out_dtype, {}};
  for (int64_t d : lb) out.dims.push_back(lhs.dims[d]);
  for (int64_t i = 0; i < lhs.rank(); ++i) {
    if (std::find(lall.begin(), lall.end(), i) == lall.end()) out.dims.push_back(lhs.dims[i]);
  }
  for (int64_t i = 0; i < rhs.rank(); ++i) {
    if (std::find(rall.begin(), rall.end(), i) == rall.end()) out.dims.push_back(rhs.dims[i]);
  }
  return Types{out};
}

// dot_accumulate acc lhs rhs i0..i{r-1}: acc with the box of the product's shape at the (clamped)
// start indices increased by dot_general(lhs, rhs). The product takes acc's dtype
// (preferred_element_type, when set, must be it); it is summed in f32 for float types and added
// to acc with one rounding. The collective-fusion pass builds rings from it, so that each
// partial product lands in (or is added to) its place in the result without a copy.
absl::StatusOr<Types> DotAccumulate(const ShapeContext& ctx, const Types& operands,
                                    const Op& op) {
  const ShapedType& acc = operands[0];
  if (operands.size() != static_cast<size_t>(3 + acc.rank())) {
    return RuleError(op, operands, "expects acc, lhs, rhs and {} start indices (one per acc dim)",
                     acc.rank());
  }
  ASSIGN_OR_RETURN(Types dot, DotGeneral(ctx, {operands[1], operands[2]}, op));
  const ShapedType& product = dot[0];
  if (product.dtype != acc.dtype) {
    return RuleError(op, operands, "the product is {} but acc is {}", DTypeName(product.dtype),
                     DTypeName(acc.dtype));
  }
  if (product.rank() != acc.rank()) {
    return RuleError(op, operands, "the product {} has rank {}, acc {}", product.ToString(),
                     product.rank(), acc.rank());
  }
  for (int64_t d = 0; d < acc.rank(); ++d) {
    if (product.dims[d] > acc.dims[d]) {
      return RuleError(op, operands, "the product {} does not fit in acc along dim {}",
                       product.ToString(), d);
    }
  }
  for (size_t i = 3; i < operands.size(); ++i) {
    if (operands[i] != ShapedType{DType::kS32, {}}) {
      return RuleError(op, operands, "start index {} must be s32[]", i - 3);
    }
  }
  return Types{acc};
}

const bool registered = [] {
  RegisterStructural({"constant", PrimitiveKind::kStructural, 0, 0, Op::kConstant, Constant});
  RegisterStructural({"iota", PrimitiveKind::kStructural, 0, 0, Op::kIota, Iota});
  for (const char* name : {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
                           "reduce_or"}) {
    RegisterStructural({name, PrimitiveKind::kStructural, 1, 1, Op::kReduce, Reduce});
  }
  RegisterStructural(
      {"dot_general", PrimitiveKind::kStructural, 2, 2, Op::kDotGeneral, DotGeneral});
  RegisterStructural(
      {"dot_accumulate", PrimitiveKind::kStructural, 3, -1, Op::kDotGeneral, DotAccumulate});
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
