// JVP and transpose rules of the reductions, dot_general and the data-movement primitives, as
// jax.lax defines them: every one but reduce_max/min is linear in its array operands, so its JVP
// is the op on tangents and its transpose the adjoint data movement (broadcast <-> sum, slice <->
// pad, dynamic_slice <-> dynamic_update_slice into zeros, dot_general <-> dot_general with the
// other operand).
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

Ids ToIds(const google::protobuf::RepeatedField<int64_t>& f) { return {f.begin(), f.end()}; }

bool Contains(const Ids& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// The JVP of an op linear in every operand with a tangent: the op on the tangents (zeros
// instantiated where an operand has none; non-float operands, such as indices, kept as they are).
JvpRule LinearJvp() {
  return [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
    Ids operands;
    for (size_t i = 0; i < a.primals.size(); ++i) {
      const ShapedType type = e.TypeOf(a.primals[i]);
      if (!IsFloating(type.dtype)) {
        operands.push_back(a.primals[i]);
        continue;
      }
      ASSIGN_OR_RETURN(int64_t t, e.Instantiate(a.tangents[i], type));
      operands.push_back(t);
    }
    return e.Emit(OpAttrs(a.op), operands);
  };
}

// The same op on the cotangent alone (reshape-like ops whose adjoint is the inverse map).
AdRules ReduceSumRule() {
  return {.jvp = LinearJvp(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            const ShapedType& x = a.operand_types[0];
            const Ids axes = ToIds(a.op.reduce().axes());
            Ids kept;
            for (int64_t d = 0; d < x.rank(); ++d) {
              if (!Contains(axes, d)) kept.push_back(d);
            }
            ASSIGN_OR_RETURN(int64_t c, e.BroadcastInDim(a.cotangents[0], x.dims, kept));
            return Ids{c};
          }};
}

// reduce_max / reduce_min: the tangent of the chosen elements, averaged over ties.
AdRules ReduceChooserRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
    const int64_t x = a.primals[0];
    const ShapedType type = e.TypeOf(x);
    const Ids axes = ToIds(a.op.reduce().axes());
    Ids kept;
    for (int64_t d = 0; d < type.rank(); ++d) {
      if (!Contains(axes, d)) kept.push_back(d);
    }
    ASSIGN_OR_RETURN(int64_t ans, e.BroadcastInDim(a.results[0], type.dims, kept));
    ASSIGN_OR_RETURN(int64_t is_ans, e.Compare(x, ans, EQ));
    ASSIGN_OR_RETURN(int64_t where, e.Convert(is_ans, type.dtype));
    ASSIGN_OR_RETURN(int64_t counts, e.ReduceSum(where, axes));
    ASSIGN_OR_RETURN(int64_t picked, e.Binary("mul", a.tangents[0], where));
    ASSIGN_OR_RETURN(int64_t sum, e.ReduceSum(picked, axes));
    ASSIGN_OR_RETURN(int64_t t, e.Binary("div", sum, counts));
    return Ids{t};
  }};
}

// The cotangent of dot_general's lhs x from the result's g and the rhs y (jax's
// _dot_general_transpose_lhs); `swap`: x is the rhs (the result's free dims of x come last).
absl::StatusOr<int64_t> DotTransposeLhs(AdEmitter& e, int64_t g, int64_t y,
                                        const ShapedType& x_type, const Ids& x_contract,
                                        const Ids& y_contract, const Ids& x_batch,
                                        const Ids& y_batch, bool swap) {
  const ShapedType y_type = e.TypeOf(y);
  auto remaining = [](int64_t rank, const Ids& a, const Ids& b) {
    Ids out;
    for (int64_t d = 0; d < rank; ++d) {
      if (!Contains(a, d) && !Contains(b, d)) out.push_back(d);
    }
    return out;
  };
  const Ids x_kept = remaining(x_type.rank(), x_contract, x_batch);
  const Ids y_kept = remaining(y_type.rank(), y_contract, y_batch);
  const int64_t nb = static_cast<int64_t>(x_batch.size());
  Ids ans_batch(nb), ans_y(y_kept.size());
  std::iota(ans_batch.begin(), ans_batch.end(), 0);
  // The result is [batch, lhs free, rhs free]: y's free dims follow x's, or precede them (swap).
  const int64_t y_first = swap ? nb : nb + static_cast<int64_t>(x_kept.size());
  std::iota(ans_y.begin(), ans_y.end(), y_first);
  // x's contracting dims in the order of y's.
  Ids order(y_contract.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t i, int64_t j) { return y_contract[i] < y_contract[j]; });
  Ids x_contract_by_y;
  for (int64_t i : order) x_contract_by_y.push_back(x_contract[i]);
  Ids layout = x_batch;
  layout.insert(layout.end(), x_kept.begin(), x_kept.end());
  layout.insert(layout.end(), x_contract_by_y.begin(), x_contract_by_y.end());
  Ids out_axes(layout.size());  // argsort(layout)
  std::iota(out_axes.begin(), out_axes.end(), 0);
  std::sort(out_axes.begin(), out_axes.end(),
            [&](int64_t i, int64_t j) { return layout[i] < layout[j]; });
  // y . g instead gives x's dims as [batch, contracting (in y's order), kept]: when that is x's
  // own order (a weight's gradient h^T g), no transpose follows the product.
  Ids swapped_layout = x_batch;
  swapped_layout.insert(swapped_layout.end(), x_contract_by_y.begin(), x_contract_by_y.end());
  swapped_layout.insert(swapped_layout.end(), x_kept.begin(), x_kept.end());
  bool in_order = true;
  for (size_t i = 0; i < out_axes.size(); ++i) in_order = in_order && out_axes[i] == int64_t(i);
  bool y_dot_g = true;
  for (size_t i = 0; i < swapped_layout.size(); ++i) {
    y_dot_g = y_dot_g && swapped_layout[i] == int64_t(i);
  }
  y_dot_g = y_dot_g && !in_order;
  // The product in g's dtype (y converted to it), then x's dtype.
  const DType g_dtype = e.TypeOf(g).dtype;
  ASSIGN_OR_RETURN(int64_t y_g, e.Convert(y, g_dtype));
  Op dot;
  dot.set_opcode("dot_general");
  DotGeneralAttrs* d = dot.mutable_dot_general();  // set even when every list is empty
  for (int64_t v : y_dot_g ? y_kept : ans_y) d->add_lhs_contracting_dims(v);
  for (int64_t v : y_dot_g ? ans_y : y_kept) d->add_rhs_contracting_dims(v);
  for (int64_t v : y_dot_g ? y_batch : ans_batch) d->add_lhs_batch_dims(v);
  for (int64_t v : y_dot_g ? ans_batch : y_batch) d->add_rhs_batch_dims(v);
  d->set_preferred_element_type(ToProto(g_dtype));
  if (y_dot_g) {
    ASSIGN_OR_RETURN(int64_t product, e.Emit1(std::move(dot), {y_g, g}));
    return e.Convert(product, x_type.dtype);
  }
  ASSIGN_OR_RETURN(int64_t product, e.Emit1(std::move(dot), {g, y_g}));
  ASSIGN_OR_RETURN(int64_t moved, e.Transpose(product, out_axes));
  return e.Convert(moved, x_type.dtype);
}

AdRules DotGeneralRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
            const Op attrs = OpAttrs(a.op);
            int64_t t = kZero;
            if (a.tangents[0] != kZero) {
              ASSIGN_OR_RETURN(t, e.Emit1(attrs, {a.tangents[0], a.primals[1]}));
            }
            if (a.tangents[1] != kZero) {
              ASSIGN_OR_RETURN(int64_t ty, e.Emit1(attrs, {a.primals[0], a.tangents[1]}));
              ASSIGN_OR_RETURN(t, e.AddAny(t, ty));
            }
            return Ids{t};
          },
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            if (a.linear[0] && a.linear[1]) {
              return absl::InternalError("dot_general: transposed with both operands linear");
            }
            const DotGeneralAttrs& d = a.op.dot_general();
            const Ids lc = ToIds(d.lhs_contracting_dims()), rc = ToIds(d.rhs_contracting_dims());
            const Ids lb = ToIds(d.lhs_batch_dims()), rb = ToIds(d.rhs_batch_dims());
            Ids cts{kZero, kZero};
            if (a.linear[0]) {
              ASSIGN_OR_RETURN(cts[0], DotTransposeLhs(e, a.cotangents[0], a.operands[1],
                                                       a.operand_types[0], lc, rc, lb, rb,
                                                       /*swap=*/false));
            } else {
              ASSIGN_OR_RETURN(cts[1], DotTransposeLhs(e, a.cotangents[0], a.operands[0],
                                                       a.operand_types[1], rc, lc, rb, lb,
                                                       /*swap=*/true));
            }
            return cts;
          }};
}

AdRules BroadcastInDimRule() {
  return {.jvp = LinearJvp(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            const ShapedType& x = a.operand_types[0];
            const Ids bdims = ToIds(a.op.broadcast_in_dim().broadcast_dimensions());
            const int64_t out_rank = a.op.broadcast_in_dim().shape_size();
            Ids kept;  // result dims that carry a non-unit operand dim
            for (int64_t i = 0; i < x.rank(); ++i) {
              if (x.dims[i] != 1) kept.push_back(bdims[i]);
            }
            Ids axes;
            for (int64_t d = 0; d < out_rank; ++d) {
              if (!Contains(kept, d)) axes.push_back(d);
            }
            ASSIGN_OR_RETURN(int64_t sum, e.ReduceSum(a.cotangents[0], axes));
            ASSIGN_OR_RETURN(int64_t c, e.Reshape(sum, x.dims));
            return Ids{c};
          }};
}

AdRules ReshapeRule() {
  return {.jvp = LinearJvp(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            ASSIGN_OR_RETURN(int64_t c, e.Reshape(a.cotangents[0], a.operand_types[0].dims));
            return Ids{c};
          }};
}

AdRules TransposeRule() {
  return {.jvp = LinearJvp(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            const Ids perm = ToIds(a.op.transpose().permutation());
            Ids inverse(perm.size());
            for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
            ASSIGN_OR_RETURN(int64_t c, e.Transpose(a.cotangents[0], inverse));
            return Ids{c};
          }};
}

AdRules RevRule() {
  return {.jvp = LinearJvp(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            ASSIGN_OR_RETURN(int64_t c, e.Emit1(OpAttrs(a.op), {a.cotangents[0]}));
            return Ids{c};
          }};
}

// pad(t, 0) with per-dim (low, high, interior).
absl::StatusOr<int64_t> PadWithZeros(AdEmitter& e, int64_t t, const Ids& low, const Ids& high,
                                     const Ids& interior) {
  ASSIGN_OR_RETURN(int64_t zero, e.Full(0, {e.TypeOf(t).dtype, {}}));
  Op pad;
  pad.set_opcode("pad");
  pad.mutable_pad();  // set even for a scalar
  for (size_t i = 0; i < low.size(); ++i) {
    PaddingConfigDim* c = pad.mutable_pad()->add_padding_config();
    c->set_low(low[i]);
    c->set_high(high[i]);
    c->set_interior(interior[i]);
  }
  return e.Emit1(std::move(pad), {t, zero});
}

absl::StatusOr<int64_t> Slice(AdEmitter& e, int64_t x, const Ids& start, const Ids& limit,
                              const Ids& strides) {
  Op slice;
  slice.set_opcode("slice");
  slice.mutable_slice();  // set even for a scalar
  for (int64_t v : start) slice.mutable_slice()->add_start_indices(v);
  for (int64_t v : limit) slice.mutable_slice()->add_limit_indices(v);
  for (int64_t v : strides) slice.mutable_slice()->add_strides(v);
  return e.Emit1(std::move(slice), {x});
}

AdRules SliceRule() {
  return {.jvp = LinearJvp(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            const ShapedType& x = a.operand_types[0];
            const ShapedType t = e.TypeOf(a.cotangents[0]);
            const Ids start = ToIds(a.op.slice().start_indices());
            Ids strides = ToIds(a.op.slice().strides());
            if (strides.empty()) strides.assign(x.rank(), 1);
            Ids high(x.rank()), interior(x.rank());
            for (int64_t d = 0; d < x.rank(); ++d) {
              const int64_t real_limit =
                  start[d] + (t.dims[d] == 0 ? 0 : 1 + (t.dims[d] - 1) * strides[d]);
              high[d] = x.dims[d] - real_limit;
              interior[d] = t.dims[d] == 0 ? 0 : strides[d] - 1;
            }
            ASSIGN_OR_RETURN(int64_t c, PadWithZeros(e, a.cotangents[0], start, high, interior));
            return Ids{c};
          }};
}

// pad is linear in the operand and the padding value.
AdRules PadRule() {
  return {.jvp = LinearJvp(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            const int64_t t = a.cotangents[0];
            const ShapedType& x = a.operand_types[0];
            Ids low, high, zeros(x.rank(), 0), start(x.rank(), 0), strides;
            for (const PaddingConfigDim& c : a.op.pad().padding_config()) {
              low.push_back(-c.low());
              high.push_back(-c.high());
              strides.push_back(c.interior() + 1);
            }
            ASSIGN_OR_RETURN(int64_t unpadded, PadWithZeros(e, t, low, high, zeros));
            ASSIGN_OR_RETURN(int64_t t_operand,
                             Slice(e, unpadded, start, e.TypeOf(unpadded).dims, strides));
            Ids cts{kZero, kZero};
            if (a.linear[0]) cts[0] = t_operand;
            if (a.linear[1]) {
              Ids all_t(e.TypeOf(t).rank()), all_x(x.rank());
              std::iota(all_t.begin(), all_t.end(), 0);
              std::iota(all_x.begin(), all_x.end(), 0);
              ASSIGN_OR_RETURN(int64_t total, e.ReduceSum(t, all_t));
              ASSIGN_OR_RETURN(int64_t inner, e.ReduceSum(t_operand, all_x));
              ASSIGN_OR_RETURN(cts[1], e.Binary("sub", total, inner));
            }
            return cts;
          }};
}

AdRules ConcatenateRule() {
  return {.jvp = LinearJvp(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            const int64_t dim = a.op.concatenate().dimension();
            const ShapedType t = e.TypeOf(a.cotangents[0]);
            Ids cts(a.operands.size(), kZero);
            int64_t offset = 0;
            for (size_t i = 0; i < a.operands.size(); ++i) {
              const ShapedType& x = a.operand_types[i];
              if (a.linear[i]) {
                Ids start(t.rank(), 0), limit = t.dims, strides(t.rank(), 1);
                start[dim] = offset;
                limit[dim] = offset + x.dims[dim];
                ASSIGN_OR_RETURN(cts[i], Slice(e, a.cotangents[0], start, limit, strides));
              }
              offset += x.dims[dim];
            }
            return cts;
          }};
}

Op DynamicUpdateSliceOp() {
  Op op;
  op.set_opcode("dynamic_update_slice");
  return op;
}

AdRules DynamicSliceRule() {
  return {.jvp = LinearJvp(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            ASSIGN_OR_RETURN(int64_t zeros, e.Full(0, a.operand_types[0]));
            Ids operands{zeros, a.cotangents[0]};
            operands.insert(operands.end(), a.operands.begin() + 1, a.operands.end());
            ASSIGN_OR_RETURN(int64_t c, e.Emit1(DynamicUpdateSliceOp(), operands));
            Ids cts(a.operands.size(), kZero);
            cts[0] = c;
            return cts;
          }};
}

AdRules DynamicUpdateSliceRule() {
  return {.jvp = LinearJvp(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            const Ids indices(a.operands.begin() + 2, a.operands.end());
            Ids cts(a.operands.size(), kZero);
            if (a.linear[0]) {
              ASSIGN_OR_RETURN(int64_t zeros, e.Full(0, a.operand_types[1]));
              Ids operands{a.cotangents[0], zeros};
              operands.insert(operands.end(), indices.begin(), indices.end());
              ASSIGN_OR_RETURN(cts[0], e.Emit1(DynamicUpdateSliceOp(), operands));
            }
            if (a.linear[1]) {
              Op slice;
              slice.set_opcode("dynamic_slice");
              slice.mutable_dynamic_slice();  // set even for a scalar
              for (int64_t d : a.operand_types[1].dims) {
                slice.mutable_dynamic_slice()->add_slice_sizes(d);
              }
              Ids operands{a.cotangents[0]};
              operands.insert(operands.end(), indices.begin(), indices.end());
              ASSIGN_OR_RETURN(cts[1], e.Emit1(std::move(slice), operands));
            }
            return cts;
          }};
}

// with_sharding_constraint: the identity, so the constraint on the tangent and on the
// cotangent.
AdRules ShardingConstraintRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
            return e.Emit(OpAttrs(a.op), {a.tangents[0]});
          },
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            return e.Emit(OpAttrs(a.op), {a.cotangents[0]});
          }};
}

const AdRuleTable& Rules() {
  static const auto* rules = new AdRuleTable{
      {"reduce_sum", ReduceSumRule()},
      {"reduce_max", ReduceChooserRule()},
      {"reduce_min", ReduceChooserRule()},
      {"reduce_prod", ScanAd("reduce_prod")},
      {"with_sharding_constraint", ShardingConstraintRule()},
      {"dot_general", DotGeneralRule()},
      {"broadcast_in_dim", BroadcastInDimRule()},
      {"reshape", ReshapeRule()},
      {"transpose", TransposeRule()},
      {"rev", RevRule()},
      {"slice", SliceRule()},
      {"pad", PadRule()},
      {"concatenate", ConcatenateRule()},
      {"dynamic_slice", DynamicSliceRule()},
      {"dynamic_update_slice", DynamicUpdateSliceRule()},
  };
  return *rules;
}

}  // namespace

AdRules StructuralAd(std::string_view name) {
  AdRules rules = FindAdRules(Rules(), name);
  rules.batch = BatchRuleFor(name);
  return rules;
}

}  // namespace shardjit::ir::prims
