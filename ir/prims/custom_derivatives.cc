// Shape rules of the ops that carry differentiation choices of the user: custom_jvp_call,
// custom_vjp_call and checkpoint (their regions' interfaces; the verifier checks the ops
// inside), optimization_barrier, the identity that common-subexpression elimination does
// not look through, and name, the identity checkpoint policies select saved values by.
// ir/autodiff.h and ir/batching.h give the region ops their meaning under transformations; the
// pipeline inlines them before lowering (passes/inline_calls.h).
#include "base/status_macros.h"
#include "ir/autodiff.h"
#include "ir/dtype.h"
#include "ir/prims/rule_util.h"

namespace shardjit::ir::prims {
namespace {

Types Concat(Types a, const Types& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Checks that `got` (results of region `name`) has the types `want`, with JAX's wording for
// what the user's rule returned.
absl::Status CheckRuleResults(const Op& op, const Types& operands, std::string_view name,
                              std::string_view what, const Types& got, const Types& want) {
  if (got != want) {
    return RuleError(op, operands, "{} returns ({}); {} must be ({})", name, TypesToString(got),
                     what, TypesToString(want));
  }
  return absl::OkStatus();
}

absl::StatusOr<Types> CustomJvpCall(const ShapeContext& ctx, const Types& operands,
                                    const Op& op) {
  const CustomJvpCallAttrs& a = op.custom_jvp_call();
  RETURN_IF_ERROR(CheckRegionParams(op, operands, a.fun(), "fun", operands));
  RETURN_IF_ERROR(CheckRegionParams(op, operands, a.jvp(), "jvp", Concat(operands, operands)));
  ASSIGN_OR_RETURN(Types results, RegionResultTypes(ctx, op, operands, a.fun()));
  ASSIGN_OR_RETURN(Types jvp, RegionResultTypes(ctx, op, operands, a.jvp()));
  RETURN_IF_ERROR(CheckRuleResults(op, operands, "jvp",
                                   "the primal and tangent outputs of a custom JVP rule",
                                   jvp, Concat(results, results)));
  return results;
}

absl::StatusOr<Types> CustomVjpCall(const ShapeContext& ctx, const Types& operands,
                                    const Op& op) {
  const CustomVjpCallAttrs& a = op.custom_vjp_call();
  RETURN_IF_ERROR(CheckRegionParams(op, operands, a.fun(), "fun", operands));
  RETURN_IF_ERROR(CheckRegionParams(op, operands, a.fwd(), "fwd", operands));
  ASSIGN_OR_RETURN(Types results, RegionResultTypes(ctx, op, operands, a.fun()));
  ASSIGN_OR_RETURN(Types fwd, RegionResultTypes(ctx, op, operands, a.fwd()));
  if (fwd.size() < results.size() ||
      Types(fwd.begin(), fwd.begin() + static_cast<std::ptrdiff_t>(results.size())) != results) {
    return RuleError(op, operands,
                     "fwd returns ({}); a custom VJP fwd rule must return the primal outputs "
                     "({}) followed by the residuals", TypesToString(fwd),
                     TypesToString(results));
  }
  const Types residuals(fwd.begin() + static_cast<std::ptrdiff_t>(results.size()), fwd.end());
  RETURN_IF_ERROR(
      CheckRegionParams(op, operands, a.bwd(), "bwd", Concat(residuals, results)));
  ASSIGN_OR_RETURN(Types bwd, RegionResultTypes(ctx, op, operands, a.bwd()));
  RETURN_IF_ERROR(CheckRuleResults(
      op, operands, "bwd",
      "a custom VJP bwd rule's output (one cotangent per primal input, of its shape and dtype)",
      bwd, operands));
  return results;
}

// A checkpoint policy and the names it lists: a known policy, names only for the name policies.
absl::Status CheckPolicy(const Op& op, const Types& operands, CheckpointPolicy policy,
                         int num_names) {
  if (!CheckpointPolicy_IsValid(policy)) {
    return RuleError(op, operands, "policy {} is not a checkpoint policy",
                     static_cast<int>(policy));
  }
  const bool by_name = policy == SAVE_ONLY_THESE_NAMES || policy == SAVE_ANY_NAMES_BUT_THESE ||
                       policy == SAVE_ANYTHING_EXCEPT_THESE_NAMES;
  if (!by_name && num_names > 0) {
    return RuleError(op, operands, "policy {} takes no names (got {})",
                     CheckpointPolicy_Name(policy), num_names);
  }
  return absl::OkStatus();
}

absl::StatusOr<Types> Checkpoint(const ShapeContext& ctx, const Types& operands, const Op& op) {
  const CheckpointAttrs& a = op.checkpoint();
  RETURN_IF_ERROR(CheckPolicy(op, operands, a.policy(), a.names_size()));
  for (const CheckpointSavePolicy& also : a.also_saved()) {
    RETURN_IF_ERROR(CheckPolicy(op, operands, also.policy(), also.names_size()));
  }
  RETURN_IF_ERROR(CheckRegionParams(op, operands, a.body(), "body", operands));
  return RegionResultTypes(ctx, op, operands, a.body());
}

// optimization_barrier and name: their operands.
absl::StatusOr<Types> Identity(const ShapeContext&, const Types& operands, const Op&) {
  return operands;
}

// The barrier's tangents are its operands' (the barrier only orders the primal computation);
// batched, it is the barrier of the batched operands. The same holds for name (JAX does not
// name the tangent).
AdRules IdentityAd() {
  AdRules rules;
  rules.jvp = [](AdEmitter&, const JvpArgs& args) -> absl::StatusOr<std::vector<int64_t>> {
    return args.tangents;
  };
  rules.batch = [](AdEmitter& e, const BatchArgs& args) -> absl::StatusOr<BatchedValues> {
    ASSIGN_OR_RETURN(std::vector<int64_t> values, e.Emit(OpAttrs(args.op), args.operands));
    return BatchedValues{std::move(values), args.batch_dims};
  };
  return rules;
}

const bool registered = [] {
  RegisterPrimitive({"custom_jvp_call", PrimitiveKind::kControlFlow, 0, -1, Op::kCustomJvpCall,
                     CustomJvpCall});
  RegisterPrimitive({"custom_vjp_call", PrimitiveKind::kControlFlow, 0, -1, Op::kCustomVjpCall,
                     CustomVjpCall});
  RegisterPrimitive(
      {"checkpoint", PrimitiveKind::kControlFlow, 0, -1, Op::kCheckpoint, Checkpoint});
  RegisterPrimitive({"optimization_barrier", PrimitiveKind::kStructural, 1, -1,
                     Op::ATTRS_NOT_SET, Identity, Prim::kUnknown,
                     IdentityAd()});
  RegisterPrimitive({"name", PrimitiveKind::kStructural, 1, 1, Op::kCheckpointName, Identity,
                     Prim::kUnknown, IdentityAd()});
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
