// Shape rule of `fusion`: a closed elementwise body, one loop over the shape of its result. Its
// operands have that shape, or are scalars, or are read by broadcast_in_dim ops of the body only
// (a row's scale, a mask shared by every batch). The verifier checks the ops inside the body;
// this rule checks its interface and that it holds only elementwise ops and broadcasts.
#include "base/status_macros.h"
#include "ir/prims/rule_util.h"

namespace shardjit::ir::prims {
namespace {

absl::Status CheckBodyOps(const Op& op, const Types& operands, const Region& body) {
  for (const Op& inner : body.ops()) {
    const Prim p = PrimOf(inner);
    if (IsElementwise(p) || p == Prim::kBroadcastInDim) continue;
    return RuleError(op, operands,
                     "body op {} is not elementwise (only elementwise ops and broadcasts may be "
                     "fused)",
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
  for (size_t i = 0; i < operands.size(); ++i) {
    if (FromProto(body.params(i).type()) != operands[i]) {
      return RuleError(op, operands, "body param {} is {}, but operand {} is {}", i,
                       FromProto(body.params(i).type()).ToString(), i, operands[i].ToString());
    }
  }
  if (body.results_size() != 1) {
    return RuleError(op, operands, "body returns {} values; expected one", body.results_size());
  }
  RETURN_IF_ERROR(CheckBodyOps(op, operands, body));
  if (!ctx.value_type) return RuleError(op, operands, "region results cannot be typed here");
  ASSIGN_OR_RETURN(ShapedType result, ctx.value_type(body.results(0)));
  // Operands of another shape than the result's: read, and by broadcasts only.
  for (size_t i = 0; i < operands.size(); ++i) {
    if (operands[i].rank() == 0 || operands[i].dims == result.dims) continue;
    const int64_t param = body.params(static_cast<int>(i)).id();
    bool read = false, by_broadcasts = true;
    for (const Op& inner : body.ops()) {
      for (int64_t id : inner.operands()) {
        if (id != param) continue;
        read = true;
        by_broadcasts &= PrimOf(inner) == Prim::kBroadcastInDim;
      }
    }
    for (int64_t id : body.results()) by_broadcasts &= id != param;
    if (!read || !by_broadcasts) {
      return RuleError(op, operands,
                       "operand {} is {}, not of the result's shape {}, and is not read by "
                       "broadcasts only",
                       i, operands[i].ToString(), result.ToString());
    }
  }
  return Types{result};
}

const bool registered = [] {
  RegisterPrimitive({"fusion", PrimitiveKind::kStructural, 0, -1, Op::kFusion, Fusion});
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
