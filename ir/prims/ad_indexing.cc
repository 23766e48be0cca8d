// JVP and transpose rules of gather, scatter_add, the sorts and the cumulative sums, as jax.lax
// defines them: gather and scatter_add are linear and transpose into each other with the same
// dimension numbers and mode; sort and top_k carry their tangents along the permutation they
// apply (take_along_axis of the tangents); cumsum transposes to the cumsum the other way.
#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>

#include "base/status_macros.h"
#include "ir/autodiff.h"
#include "ir/prims/ad_rules.h"

namespace shardjit::ir::prims {
namespace {

using Ids = std::vector<int64_t>;
using IdsOr = absl::StatusOr<Ids>;

bool Contains(const google::protobuf::RepeatedField<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// scatter_add(zeros of `operand_type`, indices, updates) with gather's dimension numbers.
absl::StatusOr<int64_t> ScatterAddOfGather(AdEmitter& e, const GatherAttrs& g, int64_t indices,
                                           int64_t updates, const ShapedType& operand_type) {
  Op scatter;
  scatter.set_opcode("scatter_add");
  ScatterAttrs* s = scatter.mutable_scatter();
  *s->mutable_update_window_dims() = g.offset_dims();
  *s->mutable_inserted_window_dims() = g.collapsed_slice_dims();
  *s->mutable_scatter_dims_to_operand_dims() = g.start_index_map();
  *s->mutable_operand_batching_dims() = g.operand_batching_dims();
  *s->mutable_scatter_indices_batching_dims() = g.start_indices_batching_dims();
  s->set_mode(g.mode());
  ASSIGN_OR_RETURN(int64_t zeros, e.Full(0, operand_type));
  return e.Emit1(std::move(scatter), {zeros, indices, updates});
}

// gather(x, indices) of the windows scatter_add `s` writes (its transpose for the updates).
absl::StatusOr<int64_t> GatherOfScatter(AdEmitter& e, const ScatterAttrs& s, int64_t x,
                                        int64_t indices, const ShapedType& updates_type) {
  const ShapedType x_type = e.TypeOf(x);
  Op gather;
  gather.set_opcode("gather");
  GatherAttrs* g = gather.mutable_gather();
  *g->mutable_offset_dims() = s.update_window_dims();
  *g->mutable_collapsed_slice_dims() = s.inserted_window_dims();
  *g->mutable_start_index_map() = s.scatter_dims_to_operand_dims();
  *g->mutable_operand_batching_dims() = s.operand_batching_dims();
  *g->mutable_start_indices_batching_dims() = s.scatter_indices_batching_dims();
  int pos = 0;
  for (int64_t d = 0; d < x_type.rank(); ++d) {
    if (Contains(s.inserted_window_dims(), d) || Contains(s.operand_batching_dims(), d)) {
      g->add_slice_sizes(1);
    } else {
      g->add_slice_sizes(updates_type.dims[s.update_window_dims(pos++)]);
    }
  }
  g->set_mode(s.mode());
  g->set_fill_value(0);
  return e.Emit1(std::move(gather), {x, indices});
}

AdRules GatherRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
            // The tangent's out-of-bounds slices are 0, whatever the primal's fill (jax's
            // _gather_jvp_rule).
            Op tangent = OpAttrs(a.op);
            tangent.mutable_gather()->set_fill_value(0);
            tangent.mutable_gather()->clear_fill_bits();
            return e.Emit(std::move(tangent), {a.tangents[0], a.primals[1]});
          },
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            ASSIGN_OR_RETURN(int64_t c, ScatterAddOfGather(e, a.op.gather(), a.operands[1],
                                                           a.cotangents[0], a.operand_types[0]));
            return Ids{c, kZero};
          }};
}

AdRules ScatterAddRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
            ASSIGN_OR_RETURN(int64_t t_op,
                             e.Instantiate(a.tangents[0], e.TypeOf(a.primals[0])));
            ASSIGN_OR_RETURN(int64_t t_up,
                             e.Instantiate(a.tangents[2], e.TypeOf(a.primals[2])));
            return e.Emit(OpAttrs(a.op), {t_op, a.primals[1], t_up});
          },
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            Ids cts{kZero, kZero, kZero};
            if (a.linear[0]) cts[0] = a.cotangents[0];
            if (a.linear[2]) {
              ASSIGN_OR_RETURN(cts[2], GatherOfScatter(e, a.op.scatter(), a.cotangents[0],
                                                       a.operands[1], a.operand_types[2]));
            }
            return cts;
          }};
}

// scatter (replace): jax's _scatter_jvp. Which update wins a position written twice is the
// scatter's own choice: ids scattered the same way tell it, so the tangent is the operand's
// tangent where nothing was written plus a scatter_add of the winning updates' tangents.
AdRules ScatterRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
    const ScatterAttrs& s = a.op.scatter();
    const ShapedType operand_type = e.TypeOf(a.primals[0]);
    const ShapedType updates_type = e.TypeOf(a.primals[2]);
    // One id per update window, from 1 (0: not written), broadcast over its window.
    std::vector<int64_t> ids_shape = updates_type.dims, scatter_dims;
    int64_t count = 1;
    for (int64_t d = 0; d < updates_type.rank(); ++d) {
      if (Contains(s.update_window_dims(), d)) {
        ids_shape[d] = 1;
      } else {
        scatter_dims.push_back(d);
      }
      count *= ids_shape[d];
    }
    Op iota;
    iota.set_opcode("iota");
    iota.mutable_iota()->set_dtype(ToProto(DType::kS32));
    iota.mutable_iota()->add_shape(count);
    ASSIGN_OR_RETURN(int64_t ids, e.Emit1(std::move(iota), {}));
    ASSIGN_OR_RETURN(int64_t one, e.Full(1, e.TypeOf(ids)));
    ASSIGN_OR_RETURN(ids, e.Binary("add", ids, one));
    ASSIGN_OR_RETURN(ids, e.Reshape(ids, ids_shape));
    std::vector<int64_t> all_dims(updates_type.rank());
    for (int64_t d = 0; d < updates_type.rank(); ++d) all_dims[d] = d;
    ASSIGN_OR_RETURN(int64_t update_ids, e.BroadcastInDim(ids, updates_type.dims, all_dims));
    ASSIGN_OR_RETURN(int64_t none, e.Full(0, {DType::kS32, operand_type.dims}));
    ASSIGN_OR_RETURN(int64_t scattered,
                     e.Emit1(OpAttrs(a.op), {none, a.primals[1], update_ids}));
    ASSIGN_OR_RETURN(int64_t won, GatherOfScatter(e, s, scattered, a.primals[1], updates_type));
    ASSIGN_OR_RETURN(int64_t untouched, e.Compare(scattered, none, EQ));
    ASSIGN_OR_RETURN(int64_t winning, e.Compare(update_ids, won, EQ));
    int64_t t_operand = kZero, t_updates = kZero;
    if (a.tangents[0] != kZero) {
      ASSIGN_OR_RETURN(int64_t zeros, e.Full(0, operand_type));
      ASSIGN_OR_RETURN(t_operand, e.Select(untouched, a.tangents[0], zeros));
    }
    if (a.tangents[2] != kZero) {
      ASSIGN_OR_RETURN(int64_t zeros, e.Full(0, updates_type));
      ASSIGN_OR_RETURN(t_updates, e.Select(winning, a.tangents[2], zeros));
    }
    ASSIGN_OR_RETURN(t_operand, e.Instantiate(t_operand, operand_type));
    ASSIGN_OR_RETURN(t_updates, e.Instantiate(t_updates, updates_type));
    Op add = OpAttrs(a.op);
    add.set_opcode("scatter_add");
    ASSIGN_OR_RETURN(int64_t t, e.Emit1(std::move(add), {t_operand, a.primals[1], t_updates}));
    return Ids{t};
  }};
}

// scatter_mul: linear in the operand (the same scatter_mul of its tangent); the updates'
// tangent needs unique indices, which this IR does not record: JAX's error, as JAX gives it
// without unique_indices=True.
AdRules ScatterMulRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
            if (a.tangents[2] != kZero) {
              return absl::UnimplementedError(
                  "scatter_mul gradients are only implemented if `unique_indices=True`");
            }
            return e.Emit(OpAttrs(a.op), {a.tangents[0], a.primals[1], a.primals[2]});
          },
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            if (!a.linear[0] || a.linear[2]) {
              return absl::InternalError("scatter_mul: transposed in its updates");
            }
            // The cotangent times the product of the updates landing on each position.
            ASSIGN_OR_RETURN(int64_t ones, e.Full(1, a.operand_types[0]));
            ASSIGN_OR_RETURN(int64_t factor,
                             e.Emit1(OpAttrs(a.op), {ones, a.operands[1], a.operands[2]}));
            ASSIGN_OR_RETURN(int64_t c, e.Binary("mul", a.cotangents[0], factor));
            return Ids{c, kZero, kZero};
          }};
}

// x's elements along `axis` in the order `perm` (s32, x's shape) gives: take_along_axis.
absl::StatusOr<int64_t> TakeAlongAxis(AdEmitter& e, int64_t x, int64_t perm, int64_t axis) {
  const ShapedType type = e.TypeOf(x);
  const ShapedType perm_type = e.TypeOf(perm);
  std::vector<int64_t> index_dims = perm_type.dims;
  index_dims.push_back(1);
  ASSIGN_OR_RETURN(int64_t indices, e.Reshape(perm, index_dims));
  Op gather;
  gather.set_opcode("gather");
  GatherAttrs* g = gather.mutable_gather();
  g->add_collapsed_slice_dims(axis);
  g->add_start_index_map(axis);
  for (int64_t d = 0; d < type.rank(); ++d) {
    g->add_slice_sizes(1);
    if (d == axis) continue;
    g->add_operand_batching_dims(d);
    g->add_start_indices_batching_dims(d);
  }
  g->set_mode(PROMISE_IN_BOUNDS);
  return e.Emit1(std::move(gather), {x, indices});
}

// sort: the tangents follow the permutation, found by sorting an iota along with the keys; that
// sort's other results are the primal ones.
AdRules SortRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
    const int64_t dim = a.op.sort().dimension();
    const ShapedType type = e.TypeOf(a.primals[0]);
    Op iota;
    iota.set_opcode("iota");
    iota.mutable_iota()->set_dtype(ToProto(DType::kS32));
    for (int64_t d : type.dims) iota.mutable_iota()->add_shape(d);
    iota.mutable_iota()->set_dimension(dim);
    ASSIGN_OR_RETURN(int64_t positions, e.Emit1(std::move(iota), {}));
    Ids operands = a.primals;
    operands.push_back(positions);
    ASSIGN_OR_RETURN(Ids sorted, e.Emit(OpAttrs(a.op), operands));
    const int64_t perm = sorted.back();
    if (a.recomputed_results != nullptr) {
      *a.recomputed_results = Ids(sorted.begin(), sorted.end() - 1);
    }
    Ids tangents;
    for (int64_t t : a.tangents) {
      if (t == kZero) {
        tangents.push_back(kZero);
        continue;
      }
      ASSIGN_OR_RETURN(int64_t moved, TakeAlongAxis(e, t, perm, dim));
      tangents.push_back(moved);
    }
    return tangents;
  }};
}

// top_k: the tangents at the returned indices.
AdRules TopKRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
    ASSIGN_OR_RETURN(int64_t t, TakeAlongAxis(e, a.tangents[0], a.results[1], a.op.top_k().axis()));
    return Ids{t, kZero};
  }};
}

AdRules CumsumRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
            return e.Emit(OpAttrs(a.op), {a.tangents[0]});
          },
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            Op reversed = OpAttrs(a.op);
            reversed.mutable_cumulative()->set_reverse(!a.op.cumulative().reverse());
            ASSIGN_OR_RETURN(int64_t c, e.Emit1(std::move(reversed), {a.cotangents[0]}));
            return Ids{c};
          }};
}

const AdRuleTable& Rules() {
  static const auto* rules = new AdRuleTable{
      {"gather", GatherRule()}, {"scatter_add", ScatterAddRule()}, {"scatter", ScatterRule()},
      {"scatter_mul", ScatterMulRule()},
      {"sort", SortRule()},
      {"top_k", TopKRule()},    {"cumsum", CumsumRule()},   {"cumprod", ScanAd("cumprod")},
      {"cummax", ScanAd("cummax")}, {"cummin", ScanAd("cummin")},
  };
  return *rules;
}

}  // namespace

AdRules IndexingAd(std::string_view name) {
  AdRules rules = FindAdRules(Rules(), name);
  rules.batch = BatchRuleFor(name);
  return rules;
}

}  // namespace shardjit::ir::prims
