// Shape rules of the primitives that hold regions: fori_loop, while_loop, cond and shard_map. The
// verifier checks the ops inside the regions; these rules check the regions' interfaces.
#include "base/status_macros.h"
#include "ir/prims/rule_util.h"
#include "ir/sharding.h"

namespace shardjit::ir::prims {
namespace {

absl::StatusOr<Types> ForiLoop(const ShapeContext& ctx, const Types& operands, const Op& op) {
  const ForiLoopAttrs& a = op.fori_loop();
  // The index is an s32 scalar: bounds past its range would wrap it (and a loop up to such a
  // bound runs for hours or forever); JAX refuses such Python ints too.
  for (const auto& [name, bound] : {std::pair<const char*, int64_t>{"lower", a.lower()},
                                    std::pair<const char*, int64_t>{"upper", a.upper()}}) {
    if (!FitsS32(bound)) {
      return RuleError(op, operands, "{}={} does not fit the loop index type s32 (range "
                       "[-2147483648, 2147483647])", name, bound);
    }
  }
  const Region& body = a.body();
  if (body.params_size() != static_cast<int>(operands.size()) + 1) {
    return RuleError(op, operands, "body takes {} params; expected the index and {} carries",
                     body.params_size(), operands.size());
  }
  if (FromProto(body.params(0).type()) != ShapedType{DType::kS32, {}}) {
    return RuleError(op, operands, "body's first param (the index) must be s32[], got {}",
                     FromProto(body.params(0).type()).ToString());
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    if (FromProto(body.params(i + 1).type()) != operands[i]) {
      return RuleError(op, operands, "body param {} is {}, but carry {} is {}", i + 1,
                       FromProto(body.params(i + 1).type()).ToString(), i,
                       operands[i].ToString());
    }
  }
  ASSIGN_OR_RETURN(Types results, RegionResultTypes(ctx, op, operands, body));
  if (results != operands) {
    return RuleError(op, operands, "body returns ({}), which differs from the carry types",
                     TypesToString(results));
  }
  return operands;
}

// while_loop: cond and body take the carry; cond returns pred[], body the carry's types.
absl::StatusOr<Types> WhileLoop(const ShapeContext& ctx, const Types& operands, const Op& op) {
  const WhileLoopAttrs& a = op.while_loop();
  RETURN_IF_ERROR(CheckRegionParams(op, operands, a.cond(), "cond", operands));
  RETURN_IF_ERROR(CheckRegionParams(op, operands, a.body(), "body", operands));
  ASSIGN_OR_RETURN(Types predicate, RegionResultTypes(ctx, op, operands, a.cond()));
  if (predicate != Types{ShapedType{DType::kPred, {}}}) {
    return RuleError(op, operands, "cond returns ({}); expected one pred[]",
                     TypesToString(predicate));
  }
  ASSIGN_OR_RETURN(Types results, RegionResultTypes(ctx, op, operands, a.body()));
  if (results != operands) {
    return RuleError(op, operands, "body returns ({}), which differs from the carry types",
                     TypesToString(results));
  }
  return operands;
}

// cond: an s32[] index, then the operands every branch takes; the branches return one list of
// types.
absl::StatusOr<Types> Cond(const ShapeContext& ctx, const Types& operands, const Op& op) {
  const CondAttrs& a = op.cond();
  if (a.branches().empty()) return RuleError(op, operands, "has no branches");
  if (operands.empty() || operands[0] != ShapedType{DType::kS32, {}}) {
    return RuleError(op, operands, "the first operand (the branch index) must be s32[]");
  }
  const Types args(operands.begin() + 1, operands.end());
  Types results;
  for (int b = 0; b < a.branches_size(); ++b) {
    const std::string name = fmt::format("branch {}", b);
    RETURN_IF_ERROR(CheckRegionParams(op, operands, a.branches(b), name, args));
    ASSIGN_OR_RETURN(Types out, RegionResultTypes(ctx, op, operands, a.branches(b)));
    if (b == 0) {
      results = std::move(out);
    } else if (out != results) {
      return RuleError(op, operands, "branch {} returns ({}), but branch 0 returns ({})", b,
                       TypesToString(out), TypesToString(results));
    }
  }
  return results;
}

absl::StatusOr<Types> ShardMap(const ShapeContext& ctx, const Types& operands, const Op& op) {
  const auto& a = op.shard_map();
  if (ctx.in_spmd) return RuleError(op, operands, "shard_map cannot be nested in a mapped region");
  if (ctx.mesh == nullptr || ctx.mesh->axes().empty()) {
    return RuleError(op, operands, "the module has no mesh");
  }
  const Mesh& mesh = *ctx.mesh;
  if (a.in_specs_size() != static_cast<int>(operands.size()) ||
      a.body().params_size() != static_cast<int>(operands.size())) {
    return RuleError(op, operands, "{} operands, {} in_specs, {} body params", operands.size(),
                     a.in_specs_size(), a.body().params_size());
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    absl::StatusOr<std::vector<int64_t>> local = LocalDims(
        mesh, a.in_specs(i), operands[i].dims, fmt::format("shard_map in_specs[{}]", i));
    if (!local.ok()) {
      return RuleError(op, operands, "{}", local.status().message());
    }
    ShapedType expected{operands[i].dtype, *local};
    if (FromProto(a.body().params(i).type()) != expected) {
      return RuleError(op, operands, "body param {} is {}, expected the block type {}", i,
                       FromProto(a.body().params(i).type()).ToString(), expected.ToString());
    }
  }
  ASSIGN_OR_RETURN(Types locals, RegionResultTypes(ctx, op, operands, a.body()));
  if (a.out_specs_size() != static_cast<int>(locals.size())) {
    return RuleError(op, operands, "{} out_specs for {} body results", a.out_specs_size(),
                     locals.size());
  }
  Types out;
  for (size_t i = 0; i < locals.size(); ++i) {
    const ShapedType& local = locals[i];
    if (absl::Status s = ValidateSpec(mesh, a.out_specs(i), local.rank(),
                                      fmt::format("shard_map out_specs[{}]", i));
        !s.ok()) {
      return RuleError(op, operands, "{}", s.message());
    }
    absl::StatusOr<std::vector<int64_t>> global =
        GlobalDims(mesh, a.out_specs(i), local.dims, fmt::format("shard_map out_specs[{}]", i));
    if (!global.ok()) return RuleError(op, operands, "{}", global.status().message());
    out.push_back({local.dtype, *std::move(global)});
  }
  return out;
}

const bool registered = [] {
  RegisterPrimitive({"fori_loop", PrimitiveKind::kControlFlow, 0, -1, Op::kForiLoop, ForiLoop});
  RegisterPrimitive(
      {"while_loop", PrimitiveKind::kControlFlow, 0, -1, Op::kWhileLoop, WhileLoop});
  RegisterPrimitive({"cond", PrimitiveKind::kControlFlow, 1, -1, Op::kCond, Cond});
  RegisterPrimitive({"shard_map", PrimitiveKind::kControlFlow, 0, -1, Op::kShardMap, ShardMap});
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
