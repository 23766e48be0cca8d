// Shape rule of `fusion`: a closed elementwise body applied to operands of one shape, with scalar
// operands broadcast. The verifier checks the ops inside the body; this rule checks its interface
// and that it holds only elementwise ops and broadcasts of scalars (so it is one loop).
#include "base/status_macros.h"
#include "ir/prims/rule_util.h"

namespace shardjit::ir::prims {
namespace {

absl::Status CheckBodyOps(const Op& op, const Types& operands, const Region& body) {
  for (const Op& inner : body.ops()) {
    const Prim p = PrimOf(inner);
    if (IsElementwise(p)) continue;
    if (p == Prim::kBroadcastInDim &&
        inner.broadcast_in_dim().broadcast_dimensions().empty()) {
      continue;
    }
    return RuleError(op, operands,
                     "body op {} is not elementwise (only elementwise ops and broadcasts of "
                     "scalars may be fused)",
                     inner.opcode());
  }
  return absl::OkStatus();
}

absl::StatusOr<Types> Fusion(const ShapeContext& ctx, const Types& operands, const Op& op) {
  const Region& body = op.fusion().body();
  if (body.params_size() != static_cast<int>(operands.size())) {
    return RuleError(op, operands, "body takes {} params for {} operands", body.params_size(),
                     operands.size());
  }
  const std::vector<int64_t>* shape = nullptr;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (FromProto(body.params(i).type()) != operands[i]) {
      return RuleError(op, operands, "body param {} is {}, but operand {} is {}", i,
                       FromProto(body.params(i).type()).ToString(), i, operands[i].ToString());
    }
    if (operands[i].rank() == 0) continue;
    if (shape != nullptr && *shape != operands[i].dims) {
      return RuleError(op, operands, "non-scalar operands differ in shape");
    }
    shape = &operands[i].dims;
  }
  if (body.results_size() != 1) {
    return RuleError(op, operands, "body returns {} values; expected one", body.results_size());
  }
  RETURN_IF_ERROR(CheckBodyOps(op, operands, body));
  if (!ctx.value_type) return RuleError(op, operands, "region results cannot be typed here");
  ASSIGN_OR_RETURN(ShapedType result, ctx.value_type(body.results(0)));
  if (shape != nullptr && result.dims != *shape) {
    return RuleError(op, operands, "body returns {}, but the operands' broadcast shape is {}",
                     result.ToString(), ShapedType{result.dtype, *shape}.ToString());
  }
  return Types{result};
}

const bool registered = [] {
  RegisterPrimitive({"fusion", PrimitiveKind::kStructural, 0, -1, Op::kFusion, Fusion});
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
