#include "frontend/collectives.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "frontend/trace_state.h"
#include "ir/async.h"

namespace shardjit {
namespace {

using internal::TraceState;

template <typename Attrs>
void SetAxesAndGroups(Attrs* attrs, const AxisNames& axes, const AxisIndexGroups& groups) {
  for (const std::string& a : axes.names) attrs->add_axes(a);
  for (const std::vector<int64_t>& g : groups) {
    ir::AxisIndexGroup* group = attrs->add_axis_index_groups();
    for (int64_t i : g) group->add_indices(i);
  }
}

// Emits `op` on `x` as the blocking collective, or as its `*_start` when `async`.
Tracer EmitCollective(ir::Op op, Tracer x, bool async, Loc loc) {
  const std::string blocking = op.opcode();
  if (async) op.set_opcode(ir::AsyncStartOpcode(blocking));
  TraceState* t = internal::TraceOf({x}, op.opcode().c_str());
  if (t == nullptr) return Tracer();
  return t->Emit1(std::move(op), {x}, loc);
}

// The op of each collective (attributes only), shared by the blocking and async forms.
ir::Op AllReduceOp(const char* opcode, const AxisNames& axes, const AxisIndexGroups& groups) {
  ir::Op op;
  op.set_opcode(opcode);
  SetAxesAndGroups(op.mutable_all_reduce(), axes, groups);
  return op;
}

ir::Op AllGatherOp(const Tracer& x, const AxisNames& axes, int64_t axis, bool tiled,
                   const AxisIndexGroups& groups) {
  ir::Op op;
  op.set_opcode("all_gather");
  SetAxesAndGroups(op.mutable_all_gather(), axes, groups);
  // Negative axes count from the end, as in JAX (the untiled result has one more dimension).
  if (axis < 0 && x.valid()) axis += x.rank() + (tiled ? 0 : 1);
  op.mutable_all_gather()->set_axis(axis);
  op.mutable_all_gather()->set_tiled(tiled);
  return op;
}

ir::Op PsumScatterOp(const Tracer& x, const AxisNames& axes, int64_t scatter_dimension,
                     bool tiled, const AxisIndexGroups& groups) {
  ir::Op op;
  op.set_opcode("psum_scatter");
  SetAxesAndGroups(op.mutable_psum_scatter(), axes, groups);
  if (scatter_dimension < 0 && x.valid()) scatter_dimension += x.rank();
  op.mutable_psum_scatter()->set_scatter_dimension(scatter_dimension);
  op.mutable_psum_scatter()->set_tiled(tiled);
  return op;
}

// Sets the axes and (source, target) pairs of ppermute, psend or precv attributes.
template <typename Attrs>
void SetAxesAndPerm(Attrs* attrs, const AxisNames& axes,
                    const std::vector<std::pair<int64_t, int64_t>>& perm) {
  for (const std::string& a : axes.names) attrs->add_axes(a);
  for (const auto& [source, target] : perm) {
    ir::PermutePair* p = attrs->add_perm();
    p->set_source(source);
    p->set_target(target);
  }
}

ir::Op PpermuteOp(const AxisNames& axes, const std::vector<std::pair<int64_t, int64_t>>& perm) {
  ir::Op op;
  op.set_opcode("ppermute");
  SetAxesAndPerm(op.mutable_ppermute(), axes, perm);
  return op;
}

ir::Op PbroadcastOp(const AxisNames& axes, int64_t source) {
  ir::Op op;
  op.set_opcode("pbroadcast");
  for (const std::string& a : axes.names) op.mutable_pbroadcast()->add_axes(a);
  op.mutable_pbroadcast()->set_source(source);
  return op;
}

ir::Op AllToAllOp(const Tracer& x, const AxisNames& axes, int64_t split_axis,
                  int64_t concat_axis, bool tiled, const AxisIndexGroups& groups) {
  ir::Op op;
  op.set_opcode("all_to_all");
  SetAxesAndGroups(op.mutable_all_to_all(), axes, groups);
  if (split_axis < 0 && x.valid()) split_axis += x.rank();
  if (concat_axis < 0 && x.valid()) concat_axis += x.rank();
  op.mutable_all_to_all()->set_split_axis(split_axis);
  op.mutable_all_to_all()->set_concat_axis(concat_axis);
  op.mutable_all_to_all()->set_tiled(tiled);
  return op;
}

Tracer AllReduce(const char* opcode, Tracer x, const AxisNames& axes,
                 const AxisIndexGroups& groups, bool async, Loc loc) {
  if (internal::TraceOf({x}, opcode) == nullptr) return Tracer();
  if (x.valid() && x.dtype() == DType::kPred) x = lax::convert_element_type(x, DType::kS32, loc);
  return EmitCollective(AllReduceOp(opcode, axes, groups), x, async, loc);
}

Tracer Done(const std::string& blocking, Tracer future, Loc loc) {
  const std::string opcode = ir::AsyncDoneOpcode(blocking);
  TraceState* t = internal::TraceOf({future}, opcode.c_str());
  if (t == nullptr) return Tracer();
  ir::Op op;
  op.set_opcode(opcode);
  return t->Emit1(std::move(op), {future}, loc);
}

Tracer AxisScalar(const char* opcode, const AxisNames& axes, Loc loc) {
  TraceState* t = internal::CurrentTrace();
  if (t == nullptr) return Tracer();
  ir::Op op;
  op.set_opcode(opcode);
  ir::AxisAttrs* attrs = op.mutable_axis();
  for (const std::string& a : axes.names) attrs->add_axes(a);
  return t->Emit1(std::move(op), {}, loc);
}

}  // namespace

namespace lax {

Tracer psum(Tracer x, AxisNames axes, AxisIndexGroups groups, Loc loc) {
  return AllReduce("psum", x, axes, groups, /*async=*/false, loc);
}
Tracer pmean(Tracer x, AxisNames axes, AxisIndexGroups groups, Loc loc) {
  return AllReduce("pmean", x, axes, groups, /*async=*/false, loc);
}
Tracer pmax(Tracer x, AxisNames axes, AxisIndexGroups groups, Loc loc) {
  return AllReduce("pmax", x, axes, groups, /*async=*/false, loc);
}
Tracer pmin(Tracer x, AxisNames axes, AxisIndexGroups groups, Loc loc) {
  return AllReduce("pmin", x, axes, groups, /*async=*/false, loc);
}

Tracer all_gather(Tracer x, AxisNames axes, int64_t axis, bool tiled, AxisIndexGroups groups,
                  Loc loc) {
  return EmitCollective(AllGatherOp(x, axes, axis, tiled, groups), x, /*async=*/false, loc);
}

Tracer all_gather_invariant(Tracer x, AxisNames axes, int64_t axis, bool tiled, Loc loc) {
  ir::Op op = AllGatherOp(x, axes, axis, tiled, {});
  op.mutable_all_gather()->set_invariant(true);
  return EmitCollective(std::move(op), x, /*async=*/false, loc);
}

Tracer psum_scatter(Tracer x, AxisNames axes, int64_t scatter_dimension, bool tiled,
                    AxisIndexGroups groups, Loc loc) {
  return EmitCollective(PsumScatterOp(x, axes, scatter_dimension, tiled, groups), x,
                        /*async=*/false, loc);
}

Tracer ppermute(Tracer x, AxisNames axes, std::vector<std::pair<int64_t, int64_t>> perm, Loc loc) {
  return EmitCollective(PpermuteOp(axes, perm), x, /*async=*/false, loc);
}

Tracer ragged_all_to_all(Tracer operand, Tracer output, Tracer input_offsets, Tracer send_sizes,
                         Tracer output_offsets, Tracer recv_sizes, AxisNames axes,
                         AxisIndexGroups groups, Loc loc) {
  TraceState* t = internal::TraceOf(
      {operand, output, input_offsets, send_sizes, output_offsets, recv_sizes},
      "ragged_all_to_all");
  if (t == nullptr) return Tracer();
  ir::Op op;
  op.set_opcode("ragged_all_to_all");
  SetAxesAndGroups(op.mutable_ragged_all_to_all(), axes, groups);
  return t->Emit1(std::move(op),
                  {operand, output, input_offsets, send_sizes, output_offsets, recv_sizes}, loc);
}

Tracer psend(Tracer x, AxisNames axes, std::vector<std::pair<int64_t, int64_t>> perm, Loc loc) {
  ir::Op op = PpermuteOp(axes, perm);
  op.set_opcode("psend");
  return EmitCollective(std::move(op), x, /*async=*/false, loc);
}

Tracer precv(Tracer token, ShapedType out_type, AxisNames axes,
             std::vector<std::pair<int64_t, int64_t>> perm, Loc loc) {
  TraceState* t = internal::TraceOf({token}, "precv");
  if (t == nullptr) return Tracer();
  ir::Op op;
  op.set_opcode("precv");
  ir::PrecvAttrs* attrs = op.mutable_precv();
  SetAxesAndPerm(attrs, axes, perm);
  attrs->set_dtype(ir::ToProto(out_type.dtype));
  for (int64_t d : out_type.dims) attrs->add_shape(d);
  return t->Emit1(std::move(op), {token}, loc);
}

Tracer create_token(Loc loc) { return full({0}, 0, DType::kPred, loc); }

Tracer pbroadcast(Tracer x, AxisNames axes, int64_t source, Loc loc) {
  return EmitCollective(PbroadcastOp(axes, source), x, /*async=*/false, loc);
}

Tracer all_to_all(Tracer x, AxisNames axes, int64_t split_axis, int64_t concat_axis, bool tiled,
                  AxisIndexGroups groups, Loc loc) {
  return EmitCollective(AllToAllOp(x, axes, split_axis, concat_axis, tiled, groups), x,
                        /*async=*/false, loc);
}

namespace {

// The lowest axis index whose x equals `extreme` (pmax or pmin of x), elementwise.
Tracer AxisIndexOf(Tracer x, Tracer extreme, const std::string& axis, Loc loc) {
  if (!x.valid() || !extreme.valid()) return Tracer();
  const std::vector<int64_t> shape = x.shape();
  Tracer index = jnp::broadcast_to(axis_index(AxisNames(axis), loc), shape, loc);
  Tracer none = full(shape, std::numeric_limits<int32_t>::max(), DType::kS32, loc);
  return pmin(select(eq(extreme, x, loc), index, none, loc), AxisNames(axis), {}, loc);
}

}  // namespace

Tracer pargmax(Tracer x, const std::string& axis, Loc loc) {
  return AxisIndexOf(x, pmax(x, AxisNames(axis), {}, loc), axis, loc);
}

Tracer pargmin(Tracer x, const std::string& axis, Loc loc) {
  return AxisIndexOf(x, pmin(x, AxisNames(axis), {}, loc), axis, loc);
}

Tracer pshuffle(Tracer x, AxisNames axes, std::vector<int64_t> perm, Loc loc) {
  if (!x.valid()) return Tracer();
  std::vector<bool> seen(perm.size(), false);
  bool permutation = true;
  for (int64_t p : perm) {
    permutation = permutation && p >= 0 && p < static_cast<int64_t>(perm.size()) && !seen[p];
    if (permutation) seen[p] = true;
  }
  if (!permutation) {
    x.state()->RecordError(
        absl::InvalidArgumentError(fmt::format(
            "pshuffle: `perm` does not represent a permutation: [{}]", absl::StrJoin(perm, ", "))),
        loc);
    return Tracer();
  }
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (size_t i = 0; i < perm.size(); ++i) pairs.push_back({perm[i], static_cast<int64_t>(i)});
  return ppermute(x, std::move(axes), std::move(pairs), loc);
}

Tracer pswapaxes(Tracer x, AxisNames axes, int64_t axis, AxisIndexGroups groups, Loc loc) {
  return all_to_all(x, std::move(axes), axis, axis, /*tiled=*/false, std::move(groups), loc);
}

Tracer axis_index(AxisNames axes, Loc loc) { return AxisScalar("axis_index", axes, loc); }

Tracer pvary(Tracer x, AxisNames axes, Loc loc) {
  TraceState* t = internal::TraceOf({x}, "pvary");
  if (t == nullptr || !x.valid()) return Tracer();
  if (!t->builder().checks_vma()) return x;  // untyped (check_vma=false): nothing to cast
  const ir::AxisList& have = t->builder().VmaOf(x.id());
  ir::Op op;
  op.set_opcode("pvary");
  for (const std::string& a : axes.names) {
    if (std::find(have.begin(), have.end(), a) == have.end()) op.mutable_axis()->add_axes(a);
  }
  if (op.axis().axes().empty()) return x;
  return t->Emit1(std::move(op), {x}, loc);
}
Tracer axis_size(AxisNames axes, Loc loc) { return AxisScalar("axis_size", axes, loc); }

Tracer psum_start(Tracer x, AxisNames axes, AxisIndexGroups groups, Loc loc) {
  return AllReduce("psum", x, axes, groups, /*async=*/true, loc);
}
Tracer all_gather_start(Tracer x, AxisNames axes, int64_t axis, bool tiled,
                        AxisIndexGroups groups, Loc loc) {
  return EmitCollective(AllGatherOp(x, axes, axis, tiled, groups), x, /*async=*/true, loc);
}
Tracer psum_scatter_start(Tracer x, AxisNames axes, int64_t scatter_dimension, bool tiled,
                          AxisIndexGroups groups, Loc loc) {
  return EmitCollective(PsumScatterOp(x, axes, scatter_dimension, tiled, groups), x,
                        /*async=*/true, loc);
}
Tracer ppermute_start(Tracer x, AxisNames axes, std::vector<std::pair<int64_t, int64_t>> perm,
                      Loc loc) {
  return EmitCollective(PpermuteOp(axes, perm), x, /*async=*/true, loc);
}
Tracer pbroadcast_start(Tracer x, AxisNames axes, int64_t source, Loc loc) {
  return EmitCollective(PbroadcastOp(axes, source), x, /*async=*/true, loc);
}
Tracer all_to_all_start(Tracer x, AxisNames axes, int64_t split_axis, int64_t concat_axis,
                        bool tiled, AxisIndexGroups groups, Loc loc) {
  return EmitCollective(AllToAllOp(x, axes, split_axis, concat_axis, tiled, groups), x,
                        /*async=*/true, loc);
}

Tracer psum_done(Tracer future, Loc loc) { return Done("psum", future, loc); }
Tracer all_gather_done(Tracer future, Loc loc) { return Done("all_gather", future, loc); }
Tracer psum_scatter_done(Tracer future, Loc loc) { return Done("psum_scatter", future, loc); }
Tracer ppermute_done(Tracer future, Loc loc) { return Done("ppermute", future, loc); }
Tracer pbroadcast_done(Tracer future, Loc loc) { return Done("pbroadcast", future, loc); }
Tracer all_to_all_done(Tracer future, Loc loc) { return Done("all_to_all", future, loc); }

}  // namespace lax
}  // namespace shardjit
