// JVP and transpose rules of the collectives, as jax.lax.parallel defines them for psum_p and its
// kin (check_vma=False semantics): every one is linear, so its JVP is the collective on the
// tangent; psum transposes to psum (a psum is a psum + pbroadcast; typed invariant under
// check_vma, to pvary, which transposes to psum), all_gather to psum_scatter on
// the same dimension and back (all_gather_invariant to the dynamic_slice of this device's
// block), ppermute to the inverse permutation, all_to_all to the one with
// split and concat axes swapped, pbroadcast to the psum of the cotangent kept at the source;
// pmax and pmin (which jax leaves without a rule) carry the chosen element's tangent, averaged
// over ties.
#include <string>
#include <unordered_map>

#include "base/status_macros.h"
#include "ir/autodiff.h"
#include "ir/prim.h"
#include "ir/prims/ad_rules.h"

namespace shardjit::ir::prims {
namespace {

using Ids = std::vector<int64_t>;
using IdsOr = absl::StatusOr<Ids>;

JvpRule SameOnTangent() {
  return [](AdEmitter& e, const JvpArgs& a) -> IdsOr { return e.Emit(OpAttrs(a.op), a.tangents); };
}

// A collective whose transpose is `transposed(op)` applied to the cotangent.
AdRules Linear(std::function<Op(const Op&)> transposed) {
  return {.jvp = SameOnTangent(),
          .transpose = [transposed](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            ASSIGN_OR_RETURN(int64_t c, e.Emit1(transposed(a.op), {a.cotangents[0]}));
            return Ids{c};
          }};
}

Op AllGatherOf(const Op& scatter) {
  Op op;
  op.set_opcode("all_gather");
  const PsumScatterAttrs& s = scatter.psum_scatter();
  AllGatherAttrs* g = op.mutable_all_gather();
  *g->mutable_axes() = s.axes();
  g->set_axis(s.scatter_dimension());
  g->set_tiled(s.tiled());
  *g->mutable_axis_index_groups() = s.axis_index_groups();
  return op;
}

Op PsumScatterOf(const Op& gather) {
  Op op;
  op.set_opcode("psum_scatter");
  const AllGatherAttrs& g = gather.all_gather();
  PsumScatterAttrs* s = op.mutable_psum_scatter();
  *s->mutable_axes() = g.axes();
  s->set_scatter_dimension(g.axis());
  s->set_tiled(g.tiled());
  *s->mutable_axis_index_groups() = g.axis_index_groups();
  return op;
}

Op InversePermutation(const Op& ppermute) {
  Op op = OpAttrs(ppermute);
  for (PermutePair& p : *op.mutable_ppermute()->mutable_perm()) {
    const int64_t source = p.source();
    p.set_source(p.target());
    p.set_target(source);
  }
  return op;
}

Op SwappedAxes(const Op& all_to_all) {
  Op op = OpAttrs(all_to_all);
  AllToAllAttrs* a = op.mutable_all_to_all();
  const int64_t split = a->split_axis();
  a->set_split_axis(a->concat_axis());
  a->set_concat_axis(split);
  return op;
}

Op PvaryOver(const google::protobuf::RepeatedPtrField<std::string>& axes) {
  Op op;
  op.set_opcode("pvary");
  *op.mutable_axis()->mutable_axes() = axes;
  return op;
}

// This device's index along `axes` (axis_index).
Op AxisIndexOver(const google::protobuf::RepeatedPtrField<std::string>& axes) {
  Op op;
  op.set_opcode("axis_index");
  *op.mutable_axis()->mutable_axes() = axes;
  return op;
}

// psum and pmean: the same collective on the cotangent (psum_p: a psum is a psum + pbroadcast),
// or, typed invariant (psum_invariant_p, check_vma), pvary of it (divided by the group size for
// pmean).
AdRules AllReduceRule() {
  return {.jvp = SameOnTangent(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            if (!a.op.all_reduce().invariant()) {
              ASSIGN_OR_RETURN(int64_t c, e.Emit1(OpAttrs(a.op), {a.cotangents[0]}));
              return Ids{c};
            }
            ASSIGN_OR_RETURN(int64_t c,
                             e.Emit1(PvaryOver(a.op.all_reduce().axes()), {a.cotangents[0]}));
            if (PrimOf(a.op) == Prim::kPmean) {
              Op size;
              size.set_opcode("axis_size");
              *size.mutable_axis()->mutable_axes() = a.op.all_reduce().axes();
              ASSIGN_OR_RETURN(int64_t n, e.Emit1(std::move(size), {}));
              ASSIGN_OR_RETURN(n, e.Convert(n, e.TypeOf(c).dtype));
              ASSIGN_OR_RETURN(n, e.BroadcastInDim(n, e.TypeOf(c).dims, {}));
              ASSIGN_OR_RETURN(c, e.Binary("div", c, n));
            }
            return Ids{c};
          }};
}

// all_gather: psum_scatter on the same dimension; typed invariant (jax's all_gather_invariant),
// the dynamic_slice of this device's block of the cotangent (invariant -> varying).
AdRules AllGatherRule() {
  return {.jvp = SameOnTangent(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            const AllGatherAttrs& g = a.op.all_gather();
            if (!g.invariant()) {
              ASSIGN_OR_RETURN(int64_t c, e.Emit1(PsumScatterOf(a.op), {a.cotangents[0]}));
              return Ids{c};
            }
            const ShapedType gathered = e.TypeOf(a.cotangents[0]);
            const ShapedType block = a.operand_types[0];
            // Untiled, the block is one index of the inserted dimension, dropped after.
            const int64_t size = g.tiled() ? block.dims[g.axis()] : 1;
            ASSIGN_OR_RETURN(int64_t me, e.Emit1(AxisIndexOver(g.axes()), {}));
            ASSIGN_OR_RETURN(int64_t step, e.Full(static_cast<double>(size), e.TypeOf(me)));
            ASSIGN_OR_RETURN(int64_t start, e.Binary("mul", me, step));
            ASSIGN_OR_RETURN(int64_t zero, e.Full(0, e.TypeOf(me)));
            Op slice;
            slice.set_opcode("dynamic_slice");
            Ids operands{a.cotangents[0]};
            for (int64_t d = 0; d < gathered.rank(); ++d) {
              const bool along = d == g.axis();
              slice.mutable_dynamic_slice()->add_slice_sizes(along ? size : gathered.dims[d]);
              operands.push_back(along ? start : zero);
            }
            ASSIGN_OR_RETURN(int64_t c, e.Emit1(std::move(slice), operands));
            if (!g.tiled()) {
              ASSIGN_OR_RETURN(c, e.Reshape(c, block.dims));
            }
            return Ids{c};
          }};
}

// pvary (invariant -> varying) transposes to the psum over its axes, typed invariant.
AdRules PvaryRule() {
  return {.jvp = SameOnTangent(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            Op psum;
            psum.set_opcode("psum");
            *psum.mutable_all_reduce()->mutable_axes() = a.op.axis().axes();
            psum.mutable_all_reduce()->set_invariant(true);
            ASSIGN_OR_RETURN(int64_t c, e.Emit1(std::move(psum), {a.cotangents[0]}));
            return Ids{c};
          }};
}

// pbroadcast's transpose: psum of the cotangent at the source, zeros elsewhere.
AdRules PbroadcastRule() {
  return {.jvp = SameOnTangent(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            const PbroadcastAttrs& b = a.op.pbroadcast();
            Op psum;
            psum.set_opcode("psum");
            *psum.mutable_all_reduce()->mutable_axes() = b.axes();
            ASSIGN_OR_RETURN(int64_t total, e.Emit1(std::move(psum), {a.cotangents[0]}));
            ASSIGN_OR_RETURN(int64_t me, e.Emit1(AxisIndexOver(b.axes()), {}));
            ASSIGN_OR_RETURN(int64_t source, e.Full(static_cast<double>(b.source()),
                                                    e.TypeOf(me)));
            ASSIGN_OR_RETURN(int64_t is_source, e.Compare(me, source, EQ));
            ASSIGN_OR_RETURN(int64_t zeros, e.Full(0, a.operand_types[0]));
            ASSIGN_OR_RETURN(int64_t c, e.Select(is_source, total, zeros));
            return Ids{c};
          }};
}

// pmax / pmin (jax has no rule): the tangent of the chosen element, averaged over the devices
// that tie for it: psum(t * [x == result]) / psum([x == result]) over the same group.
AdRules ChooserRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
    const int64_t x = a.primals[0];
    const ShapedType type = e.TypeOf(x);
    ASSIGN_OR_RETURN(int64_t is_chosen, e.Compare(x, a.results[0], EQ));
    ASSIGN_OR_RETURN(int64_t chosen, e.Convert(is_chosen, type.dtype));
    Op psum = OpAttrs(a.op);
    psum.set_opcode("psum");
    ASSIGN_OR_RETURN(int64_t ties, e.Emit1(psum, {chosen}));
    ASSIGN_OR_RETURN(int64_t picked, e.Binary("mul", a.tangents[0], chosen));
    ASSIGN_OR_RETURN(int64_t total, e.Emit1(psum, {picked}));
    ASSIGN_OR_RETURN(int64_t t, e.Binary("div", total, ties));
    return Ids{t};
  }};
}

// ragged_all_to_all is linear in (operand, output) together: its JVP is the op on the tangents;
// its transpose (jax's _ragged_all_to_all_transpose) sends each received slice's cotangent back
// to where it came from (the offsets exchanged with an all_to_all), and passes the output's
// cotangent through where nothing was received.
AdRules RaggedAllToAllRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
            Ids operands = a.primals;
            for (int i : {0, 1}) {
              ASSIGN_OR_RETURN(operands[i],
                               e.Instantiate(a.tangents[i], e.TypeOf(a.primals[i])));
            }
            return e.Emit(OpAttrs(a.op), operands);
          },
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            const RaggedAllToAllAttrs& r = a.op.ragged_all_to_all();
            const int64_t ct = a.cotangents[0];
            auto exchanged = [&](int64_t offsets) -> absl::StatusOr<int64_t> {
              Op a2a;
              a2a.set_opcode("all_to_all");
              AllToAllAttrs* t = a2a.mutable_all_to_all();
              *t->mutable_axes() = r.axes();
              *t->mutable_axis_index_groups() = r.axis_index_groups();
              t->set_tiled(true);
              return e.Emit1(std::move(a2a), {offsets});
            };
            // Where this device's slices came from, and where they were written here.
            ASSIGN_OR_RETURN(int64_t sources, exchanged(a.operands[2]));
            ASSIGN_OR_RETURN(int64_t written, exchanged(a.operands[4]));
            Ids cts(a.operands.size(), kZero);
            if (a.linear[0]) {
              ASSIGN_OR_RETURN(int64_t zeros, e.Full(0, a.operand_types[0]));
              ASSIGN_OR_RETURN(cts[0], e.Emit1(OpAttrs(a.op), {ct, zeros, written,
                                                              a.operands[5], sources,
                                                              a.operands[3]}));
            }
            if (a.linear[1]) {  // rows no slice was written to: written <= row < written + size
              const ShapedType type = a.operand_types[1];
              const int64_t k = e.TypeOf(written).dims[0];
              Op iota;
              iota.set_opcode("iota");
              iota.mutable_iota()->set_dtype(ToProto(DType::kS32));
              iota.mutable_iota()->add_shape(type.dims[0]);
              iota.mutable_iota()->add_shape(k);
              ASSIGN_OR_RETURN(int64_t row, e.Emit1(std::move(iota), {}));
              ASSIGN_OR_RETURN(int64_t lo, e.BroadcastInDim(written, {type.dims[0], k}, {1}));
              ASSIGN_OR_RETURN(int64_t end, e.Binary("add", written, a.operands[5]));
              ASSIGN_OR_RETURN(int64_t hi, e.BroadcastInDim(end, {type.dims[0], k}, {1}));
              ASSIGN_OR_RETURN(int64_t ge, e.Compare(row, lo, GE));
              ASSIGN_OR_RETURN(int64_t lt, e.Compare(row, hi, LT));
              ASSIGN_OR_RETURN(int64_t in, e.Binary("and", ge, lt));
              Op any;
              any.set_opcode("reduce_or");
              any.mutable_reduce()->add_axes(1);
              ASSIGN_OR_RETURN(int64_t hit, e.Emit1(std::move(any), {in}));
              std::vector<int64_t> bdims{0};
              ASSIGN_OR_RETURN(int64_t mask, e.BroadcastInDim(hit, type.dims, bdims));
              ASSIGN_OR_RETURN(int64_t zeros, e.Full(0, type));
              ASSIGN_OR_RETURN(cts[1], e.Select(mask, zeros, ct));
            }
            return cts;
          }};
}

const AdRuleTable& Rules() {
  static const auto* rules = new AdRuleTable{
      {"psum", AllReduceRule()},
      {"pmean", AllReduceRule()},
      {"pvary", PvaryRule()},
      {"all_gather", AllGatherRule()},
      {"psum_scatter", Linear(AllGatherOf)},
      {"ppermute", Linear(InversePermutation)},
      {"all_to_all", Linear(SwappedAxes)},
      {"pbroadcast", PbroadcastRule()},
      {"ragged_all_to_all", RaggedAllToAllRule()},
      {"pmax", ChooserRule()},
      {"pmin", ChooserRule()},
  };
  return *rules;
}

}  // namespace

AdRules CollectiveAd(std::string_view name) {
  AdRules rules = FindAdRules(Rules(), name);
  rules.batch = CollectiveBatch(name);
  return rules;
}

}  // namespace shardjit::ir::prims
