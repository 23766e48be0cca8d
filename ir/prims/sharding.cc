// Shape rule of with_sharding_constraint: the identity, with the sharding checked against the
// module's mesh and the operand's rank (and, in a global-view program, its dimensions).
#include "ir/sharding.h"

#include "ir/prims/rule_util.h"

namespace shardjit::ir::prims {
namespace {

absl::StatusOr<Types> WithShardingConstraint(const ShapeContext& ctx, const Types& operands,
                                             const Op& op) {
  static const Mesh* const kNoMesh = new Mesh();
  const Mesh& mesh = ctx.mesh != nullptr ? *ctx.mesh : *kNoMesh;
  const PartitionSpec& spec = op.with_sharding_constraint().sharding();
  // Per-device values are blocks: only a global view has whole dimensions to divide.
  absl::Status status = ctx.in_spmd ? ValidateSpec(mesh, spec, operands[0].rank(), "sharding")
                                    : LocalDims(mesh, spec, operands[0].dims, "sharding").status();
  if (!status.ok()) return RuleError(op, operands, "{}", status.message());
  return Types{operands[0]};
}

const bool registered = [] {
  RegisterStructural({"with_sharding_constraint", PrimitiveKind::kStructural, 1, 1,
                      Op::kWithShardingConstraint, WithShardingConstraint});
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
