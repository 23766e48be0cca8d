// Shape rules of the grouped matmuls gmm and tgmm (megablox, seed 003). Which rows form which
// group is data (group_sizes), checked by the kernels.
#include "base/status_macros.h"
#include "ir/prims/ad_rules.h"
#include "ir/prims/rule_util.h"

namespace shardjit::ir::prims {
namespace {

// The checks gmm and tgmm share: lhs and rhs of one floating dtype, group_sizes s32[G] with
// G >= 1, group_offset (when given) an s32 scalar; the result dtype.
absl::StatusOr<DType> CheckCommon(const Types& operands, const Op& op) {
  const ShapedType& lhs = operands[0];
  const ShapedType& rhs = operands[1];
  const ShapedType& sizes = operands[2];
  if (lhs.dtype != rhs.dtype) {
    return RuleError(op, operands, "lhs and rhs dtypes differ ({} vs {})", DTypeName(lhs.dtype),
                     DTypeName(rhs.dtype));
  }
  if (lhs.dtype != DType::kF32 && lhs.dtype != DType::kBF16) {
    return RuleError(op, operands, "lhs and rhs must be f32 or bf16, got {}",
                     DTypeName(lhs.dtype));
  }
  if (sizes.dtype != DType::kS32 || sizes.rank() != 1 || sizes.dims[0] < 1) {
    return RuleError(op, operands,
                     "group_sizes must be s32[num_groups] with num_groups >= 1, got {}",
                     sizes.ToString());
  }
  if (operands.size() == 4 && (operands[3].dtype != DType::kS32 || operands[3].rank() != 0)) {
    return RuleError(op, operands, "group_offset must be an s32 scalar, got {}",
                     operands[3].ToString());
  }
  const DTypeProto preferred = op.grouped_matmul().preferred_element_type();
  RETURN_IF_ERROR(CheckDTypeAttr(op, operands, "preferred_element_type", preferred,
                                 /*unset_ok=*/true));
  const DType out = preferred == DTYPE_INVALID ? lhs.dtype : FromProto(preferred);
  if (out != DType::kF32 && out != DType::kBF16) {
    return RuleError(op, operands, "preferred_element_type must be f32 or bf16, got {}",
                     DTypeName(out));
  }
  return out;
}

absl::StatusOr<Types> Gmm(const ShapeContext&, const Types& operands, const Op& op) {
  ASSIGN_OR_RETURN(DType out, CheckCommon(operands, op));
  const ShapedType& lhs = operands[0];
  const ShapedType& rhs = operands[1];
  const bool transposed = op.grouped_matmul().transpose_rhs();
  if (lhs.rank() != 2) return RuleError(op, operands, "lhs must be rank 2 [m, k]");
  if (rhs.rank() != 3) {
    return RuleError(op, operands, "rhs must be rank 3 [num_groups, {}]",
                     transposed ? "n, k" : "k, n");
  }
  const int64_t rhs_k = rhs.dims[transposed ? 2 : 1];
  if (rhs_k != lhs.dims[1]) {
    return RuleError(op, operands, "lhs k ({}) differs from rhs k ({}, dim {}, transpose_rhs={})",
                     lhs.dims[1], rhs_k, transposed ? 2 : 1, transposed ? "True" : "False");
  }
  if (rhs.dims[0] > operands[2].dims[0]) {
    return RuleError(op, operands, "rhs has {} groups but group_sizes only {}", rhs.dims[0],
                     operands[2].dims[0]);
  }
  if (op.grouped_matmul().num_actual_groups() != 0) {
    return RuleError(op, operands, "num_actual_groups is a tgmm attribute (gmm takes it from rhs)");
  }
  return Types{{out, {lhs.dims[0], rhs.dims[transposed ? 1 : 2]}}};
}

absl::StatusOr<Types> Tgmm(const ShapeContext&, const Types& operands, const Op& op) {
  ASSIGN_OR_RETURN(DType out, CheckCommon(operands, op));
  const ShapedType& lhs = operands[0];
  const ShapedType& rhs = operands[1];
  const auto& a = op.grouped_matmul();
  if (a.transpose_rhs()) return RuleError(op, operands, "transpose_rhs is a gmm attribute");
  if (lhs.rank() != 2 || rhs.rank() != 2) {
    return RuleError(op, operands, "lhs must be rank 2 [k, m] and rhs rank 2 [m, n]");
  }
  if (lhs.dims[1] != rhs.dims[0]) {
    return RuleError(op, operands, "lhs m ({}, dim 1) differs from rhs m ({}, dim 0)",
                     lhs.dims[1], rhs.dims[0]);
  }
  const int64_t groups = a.num_actual_groups();
  if (groups < 1 || groups > operands[2].dims[0]) {
    return RuleError(op, operands, "num_actual_groups {} is out of range [1, {}]", groups,
                     operands[2].dims[0]);
  }
  return Types{{out, {groups, lhs.dims[0], rhs.dims[1]}}};
}

const bool registered = [] {
  RegisterPrimitive({"gmm", PrimitiveKind::kStructural, 3, 4, Op::kGroupedMatmul, Gmm,
                     Prim::kUnknown, GroupedMatmulAd("gmm")});
  RegisterPrimitive({"tgmm", PrimitiveKind::kStructural, 3, 4, Op::kGroupedMatmul, Tgmm,
                     Prim::kUnknown, GroupedMatmulAd("tgmm")});
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
