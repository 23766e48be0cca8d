// Shape rules of the collectives (JAX lax.parallel semantics): psum, pmean, pmax, pmin,
// all_gather, psum_scatter, ppermute, psend, precv, pbroadcast, all_to_all, ragged_all_to_all,
// axis_index, axis_size, and the asynchronous `*_start` / `*_done` pairs (ir/async.h).
#include <algorithm>
#include <optional>
#include <set>

#include "base/status_macros.h"
#include "ir/prim.h"
#include "ir/prims/ad_rules.h"
#include "ir/prims/rule_util.h"
#include "ir/types.h"

namespace shardjit::ir::prims {
namespace {

absl::StatusOr<Types> AllReduce(const ShapeContext& ctx, const Types& operands, const Op& op) {
  ASSIGN_OR_RETURN(int64_t size, CollectiveAxisSize(ctx, op, operands));
  RETURN_IF_ERROR(CollectiveGroupSize(op, operands, size, /*equal_sizes=*/false).status());
  ShapedType out = operands[0];
  if (out.dtype == DType::kPred) {
    return RuleError(op, operands, "operand must be numeric (convert pred first)");
  }
  // pmean divides like jnp's true division: integers give f32.
  if (PrimOf(op) == Prim::kPmean && !IsFloating(out.dtype)) out.dtype = DType::kF32;
  return Types{out};
}

absl::StatusOr<Types> AllGather(const ShapeContext& ctx, const Types& operands, const Op& op) {
  const auto& a = op.all_gather();
  if (a.invariant() && a.axis_index_groups_size() > 0) {
    return RuleError(op, operands, "invariant=True takes no axis_index_groups (as JAX's "
                     "all_gather_invariant)");
  }
  ASSIGN_OR_RETURN(int64_t size, CollectiveAxisSize(ctx, op, operands));
  ASSIGN_OR_RETURN(int64_t n, CollectiveGroupSize(op, operands, size, /*equal_sizes=*/true));
  ShapedType out = operands[0];
  int64_t limit = a.tiled() ? out.rank() - 1 : out.rank();
  if (a.axis() < 0 || a.axis() > limit) {
    return RuleError(op, operands, "axis {} is out of range [0, {}] (tiled={})", a.axis(), limit,
                     a.tiled() ? "True" : "False");
  }
  if (a.tiled()) {
    std::optional<int64_t> size = CheckedMul(out.dims[a.axis()], n);
    if (!size) {
      return RuleError(op, operands, "axis {} (size {}) times the group size {} overflows",
                       a.axis(), out.dims[a.axis()], n);
    }
    out.dims[a.axis()] = *size;
  } else {
    out.dims.insert(out.dims.begin() + a.axis(), n);
  }
  return Types{out};
}

absl::StatusOr<Types> PsumScatter(const ShapeContext& ctx, const Types& operands, const Op& op) {
  const auto& a = op.psum_scatter();
  ASSIGN_OR_RETURN(int64_t size, CollectiveAxisSize(ctx, op, operands));
  ASSIGN_OR_RETURN(int64_t n, CollectiveGroupSize(op, operands, size, /*equal_sizes=*/true));
  ShapedType out = operands[0];
  int64_t d = a.scatter_dimension();
  if (d < 0 || d >= out.rank()) {
    return RuleError(op, operands, "scatter_dimension {} is out of range for rank {}", d,
                     out.rank());
  }
  if (out.dtype == DType::kPred) return RuleError(op, operands, "operand must be numeric");
  if (a.tiled()) {
    if (out.dims[d] % n != 0) {
      return RuleError(op, operands,
                       "scatter_dimension {} (size {}) is not divisible by the axis size {}", d,
                       out.dims[d], n);
    }
    out.dims[d] /= n;
  } else {
    if (out.dims[d] != n) {
      return RuleError(
          op, operands,
          "scatter_dimension {} (size {}) must equal the axis size {} when tiled=False", d,
          out.dims[d], n);
    }
    out.dims.erase(out.dims.begin() + d);
  }
  return Types{out};
}

// Checks the (source, target) pairs of a ppermute, psend or precv over its axes.
absl::Status CheckPerm(const ShapeContext& ctx, const Types& operands, const Op& op,
                       const google::protobuf::RepeatedPtrField<PermutePair>& perm) {
  ASSIGN_OR_RETURN(int64_t size, CollectiveAxisSize(ctx, op, operands));
  std::set<int64_t> sources, targets;
  for (const PermutePair& p : perm) {
    for (int64_t i : {p.source(), p.target()}) {
      if (i < 0 || i >= size) {
        return RuleError(op, operands, "perm pair ({},{}) is out of range for axis size {}",
                         p.source(), p.target(), size);
      }
    }
    if (!sources.insert(p.source()).second) {
      return RuleError(op, operands, "perm has source {} twice", p.source());
    }
    if (!targets.insert(p.target()).second) {
      return RuleError(op, operands, "perm has target {} twice", p.target());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Types> Ppermute(const ShapeContext& ctx, const Types& operands, const Op& op) {
  RETURN_IF_ERROR(CheckPerm(ctx, operands, op, op.ppermute().perm()));
  return Types{operands[0]};
}

// The token psend returns and precv takes (a zero-sized array, as XLA's tokens are).
const ShapedType kToken{DType::kPred, {0}};

absl::StatusOr<Types> Psend(const ShapeContext& ctx, const Types& operands, const Op& op) {
  RETURN_IF_ERROR(CheckPerm(ctx, operands, op, op.ppermute().perm()));
  return Types{kToken};
}

absl::StatusOr<Types> Precv(const ShapeContext& ctx, const Types& operands, const Op& op) {
  const auto& a = op.precv();
  RETURN_IF_ERROR(CheckPerm(ctx, operands, op, a.perm()));
  if (operands[0] != kToken) {
    return RuleError(op, operands, "operand must be a token (pred[0], from psend or create_token)");
  }
  if (a.dtype() == DTYPE_INVALID) return RuleError(op, operands, "dtype must be set");
  RETURN_IF_ERROR(CheckDTypeAttr(op, operands, "dtype", a.dtype()));
  ShapedType out{FromProto(a.dtype()), ToVector(a.shape())};
  if (absl::Status s = CheckTypeLimits(out); !s.ok()) {
    return RuleError(op, operands, "out shape {}: {}", out.ToString(), s.message());
  }
  return Types{out};
}

absl::StatusOr<Types> Pbroadcast(const ShapeContext& ctx, const Types& operands, const Op& op) {
  const auto& a = op.pbroadcast();
  ASSIGN_OR_RETURN(int64_t size, CollectiveAxisSize(ctx, op, operands));
  if (a.source() < 0 || a.source() >= size) {
    return RuleError(op, operands, "source {} is out of range for axis size {}", a.source(), size);
  }
  return Types{operands[0]};
}

absl::StatusOr<Types> AllToAll(const ShapeContext& ctx, const Types& operands, const Op& op) {
  const auto& a = op.all_to_all();
  ASSIGN_OR_RETURN(int64_t size, CollectiveAxisSize(ctx, op, operands));
  ASSIGN_OR_RETURN(int64_t n, CollectiveGroupSize(op, operands, size, /*equal_sizes=*/true));
  ShapedType out = operands[0];
  int64_t split = a.split_axis(), concat = a.concat_axis();
  int64_t rank = out.rank();
  if (split < 0 || split >= rank) {
    return RuleError(op, operands, "split_axis {} is out of range for rank {}", split, rank);
  }
  int64_t concat_limit = a.tiled() ? rank - 1 : rank - 1;
  if (concat < 0 || concat > concat_limit) {
    return RuleError(op, operands, "concat_axis {} is out of range for rank {}", concat, rank);
  }
  if (a.tiled()) {
    if (out.dims[split] % n != 0) {
      return RuleError(op, operands, "split_axis {} (size {}) is not divisible by the axis size {}",
                       split, out.dims[split], n);
    }
    out.dims[split] /= n;
    // The element count stays the operand's unless the split dim is 0: then the concat dim (up
    // to 2^48) times the group size (up to 2^20) could overflow.
    std::optional<int64_t> concat_size = CheckedMul(out.dims[concat], n);
    if (!concat_size) {
      return RuleError(op, operands, "concat_axis {} (size {}) times the axis size {} overflows",
                       concat, out.dims[concat], n);
    }
    out.dims[concat] = *concat_size;
  } else {
    if (out.dims[split] != n) {
      return RuleError(op, operands,
                       "split_axis {} (size {}) must equal the axis size {} when tiled=False",
                       split, out.dims[split], n);
    }
    out.dims.erase(out.dims.begin() + split);
    out.dims.insert(out.dims.begin() + concat, n);
  }
  return Types{out};
}

// Operands: operand[N, ...], output[M, ...] (the same dtype and trailing dims), then
// input_offsets, send_sizes, output_offsets, recv_sizes: s32[K] each, K a positive multiple of
// the group size. The result is `output` with the received rows written in; which rows is data,
// checked when the collective runs.
absl::StatusOr<Types> RaggedAllToAll(const ShapeContext& ctx, const Types& operands,
                                     const Op& op) {
  ASSIGN_OR_RETURN(int64_t size, CollectiveAxisSize(ctx, op, operands));
  ASSIGN_OR_RETURN(int64_t n, CollectiveGroupSize(op, operands, size, /*equal_sizes=*/true));
  const ShapedType& operand = operands[0];
  const ShapedType& output = operands[1];
  if (operand.rank() < 1) return RuleError(op, operands, "operand must have rank >= 1");
  if (operand.dtype != output.dtype || operand.rank() != output.rank() ||
      !std::equal(operand.dims.begin() + 1, operand.dims.end(), output.dims.begin() + 1)) {
    return RuleError(op, operands,
                     "output must have the operand's dtype and dimensions past the first");
  }
  static constexpr const char* kNames[] = {"input_offsets", "send_sizes", "output_offsets",
                                           "recv_sizes"};
  for (int i = 0; i < 4; ++i) {
    const ShapedType& t = operands[2 + i];
    if (t.dtype != DType::kS32) {
      return RuleError(op, operands, "{} must be integer (s32), got {}", kNames[i],
                       DTypeName(t.dtype));
    }
    if (t.rank() != 1 || t.dims[0] < 1) {
      return RuleError(op, operands,
                       "{} must be rank 1 with positive dimension size, but got shape {}",
                       kNames[i], t.ToString());
    }
    if (t.dims[0] != operands[2].dims[0]) {
      return RuleError(op, operands, "{} has length {} but input_offsets has length {}",
                       kNames[i], t.dims[0], operands[2].dims[0]);
    }
  }
  if (operands[2].dims[0] % n != 0) {
    return RuleError(op, operands,
                     "the offset and size vectors' length {} is not a multiple of the group "
                     "size {}",
                     operands[2].dims[0], n);
  }
  return Types{output};
}

absl::StatusOr<Types> AxisScalar(const ShapeContext& ctx, const Types& operands, const Op& op) {
  RETURN_IF_ERROR(CollectiveAxisSize(ctx, op, operands).status());
  return Types{{DType::kS32, {}}};
}

// pvary (jax.lax.pvary): the value itself, typed as varying over the axes (an invariant -> varying
// cast; it transposes to a psum).
absl::StatusOr<Types> Pvary(const ShapeContext& ctx, const Types& operands, const Op& op) {
  RETURN_IF_ERROR(CollectiveAxisSize(ctx, op, operands).status());
  return operands;
}

// `X_start`: X's rule, giving the future of X's result.
ShapeRule StartRule(ShapeRule blocking) {
  return [blocking](const ShapeContext& ctx, const Types& operands,
                    const Op& op) -> absl::StatusOr<Types> {
    ASSIGN_OR_RETURN(Types out, blocking(ctx, operands, op));
    for (ShapedType& t : out) t.future = true;
    return out;
  };
}

// `X_done`: the array its future resolves to. Which start made the future is the verifier's
// check (the future may come through a fori_loop carry).
absl::StatusOr<Types> Done(const ShapeContext&, const Types& operands, const Op& op) {
  if (!operands[0].future) {
    return RuleError(op, operands, "operand must be the future of a {}",
                     PrimName(AsyncStartOf(AsyncBlocking(PrimOf(op)))));
  }
  return Types{operands[0].Awaited()};
}

// Registers a collective with its differentiation rules, CollectiveAd(name).
void RegisterCollective(Primitive primitive) {
  primitive.ad = CollectiveAd(primitive.name);
  RegisterPrimitive(std::move(primitive));
}

const bool registered = [] {
  for (const char* name : {"psum", "pmean", "pmax", "pmin"}) {
    RegisterCollective({name, PrimitiveKind::kCollective, 1, 1, Op::kAllReduce, AllReduce});
  }
  RegisterCollective({"all_gather", PrimitiveKind::kCollective, 1, 1, Op::kAllGather, AllGather});
  RegisterCollective(
      {"psum_scatter", PrimitiveKind::kCollective, 1, 1, Op::kPsumScatter, PsumScatter});
  RegisterCollective({"ppermute", PrimitiveKind::kCollective, 1, 1, Op::kPpermute, Ppermute});
  RegisterCollective({"psend", PrimitiveKind::kCollective, 1, 1, Op::kPpermute, Psend});
  RegisterCollective({"precv", PrimitiveKind::kCollective, 1, 1, Op::kPrecv, Precv});
  RegisterCollective({"all_to_all", PrimitiveKind::kCollective, 1, 1, Op::kAllToAll, AllToAll});
  RegisterCollective(
      {"pbroadcast", PrimitiveKind::kCollective, 1, 1, Op::kPbroadcast, Pbroadcast});
  RegisterCollective({"ragged_all_to_all", PrimitiveKind::kCollective, 6, 6,
                      Op::kRaggedAllToAll, RaggedAllToAll});
  for (Prim async : kAsyncCollectives) {
    const Primitive* blocking = FindPrimitive(async);
    RegisterPrimitive({std::string(PrimName(AsyncStartOf(async))), PrimitiveKind::kCollective, 1,
                       1, blocking->attrs_case, StartRule(blocking->shape_rule)});
    RegisterPrimitive({std::string(PrimName(AsyncDoneOf(async))), PrimitiveKind::kCollective, 1,
                       1, Op::ATTRS_NOT_SET, Done});
  }
  for (const char* name : {"axis_index", "axis_size"}) {
    RegisterPrimitive({name, PrimitiveKind::kCollective, 0, 0, Op::kAxis, AxisScalar,
                       Prim::kUnknown, AdRules{.batch = CollectiveBatch(name)}});
  }
  RegisterCollective({"pvary", PrimitiveKind::kCollective, 1, 1, Op::kAxis, Pvary});
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
