#include "frontend/collectives.h"

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

Tracer AllReduce(const char* opcode, Tracer x, const AxisNames& axes,
                 const AxisIndexGroups& groups, Loc loc) {
  TraceState* t = internal::TraceOf({x}, opcode);
  if (t == nullptr) return Tracer();
  if (x.valid() && x.dtype() == DType::kPred) x = convert_element_type(x, DType::kS32, loc);
  ir::Op op;
  op.set_opcode(opcode);
  SetAxesAndGroups(op.mutable_all_reduce(), axes, groups);
  return t->Emit1(std::move(op), {x}, loc);
}

}  // namespace

Tracer psum(Tracer x, AxisNames axes, AxisIndexGroups groups, Loc loc) {
  return AllReduce("psum", x, axes, groups, loc);
}
Tracer pmean(Tracer x, AxisNames axes, AxisIndexGroups groups, Loc loc) {
  return AllReduce("pmean", x, axes, groups, loc);
}
Tracer pmax(Tracer x, AxisNames axes, AxisIndexGroups groups, Loc loc) {
  return AllReduce("pmax", x, axes, groups, loc);
}
Tracer pmin(Tracer x, AxisNames axes, AxisIndexGroups groups, Loc loc) {
  return AllReduce("pmin", x, axes, groups, loc);
}

Tracer all_gather(Tracer x, AxisNames axes, int64_t axis, bool tiled, AxisIndexGroups groups,
                  Loc loc) {
  TraceState* t = internal::TraceOf({x}, "all_gather");
  if (t == nullptr) return Tracer();
  ir::Op op;
  op.set_opcode("all_gather");
  SetAxesAndGroups(op.mutable_all_gather(), axes, groups);
  // Negative axes count from the end, as in JAX (the untiled result has one more dimension).
  if (axis < 0 && x.valid()) axis += x.rank() + (tiled ? 0 : 1);
  op.mutable_all_gather()->set_axis(axis);
  op.mutable_all_gather()->set_tiled(tiled);
  return t->Emit1(std::move(op), {x}, loc);
}

Tracer psum_scatter(Tracer x, AxisNames axes, int64_t scatter_dimension, bool tiled,
                    AxisIndexGroups groups, Loc loc) {
  TraceState* t = internal::TraceOf({x}, "psum_scatter");
  if (t == nullptr) return Tracer();
  ir::Op op;
  op.set_opcode("psum_scatter");
  SetAxesAndGroups(op.mutable_psum_scatter(), axes, groups);
  if (scatter_dimension < 0 && x.valid()) scatter_dimension += x.rank();
  op.mutable_psum_scatter()->set_scatter_dimension(scatter_dimension);
  op.mutable_psum_scatter()->set_tiled(tiled);
  return t->Emit1(std::move(op), {x}, loc);
}

Tracer ppermute(Tracer x, AxisNames axes, std::vector<std::pair<int64_t, int64_t>> perm, Loc loc) {
  TraceState* t = internal::TraceOf({x}, "ppermute");
  if (t == nullptr) return Tracer();
  ir::Op op;
  op.set_opcode("ppermute");
  ir::PpermuteAttrs* attrs = op.mutable_ppermute();
  for (const std::string& a : axes.names) attrs->add_axes(a);
  for (const auto& [source, target] : perm) {
    ir::PermutePair* p = attrs->add_perm();
    p->set_source(source);
    p->set_target(target);
  }
  return t->Emit1(std::move(op), {x}, loc);
}

Tracer all_to_all(Tracer x, AxisNames axes, int64_t split_axis, int64_t concat_axis, bool tiled,
                  AxisIndexGroups groups, Loc loc) {
  TraceState* t = internal::TraceOf({x}, "all_to_all");
  if (t == nullptr) return Tracer();
  ir::Op op;
  op.set_opcode("all_to_all");
  SetAxesAndGroups(op.mutable_all_to_all(), axes, groups);
  if (split_axis < 0 && x.valid()) split_axis += x.rank();
  if (concat_axis < 0 && x.valid()) concat_axis += x.rank();
  op.mutable_all_to_all()->set_split_axis(split_axis);
  op.mutable_all_to_all()->set_concat_axis(concat_axis);
  op.mutable_all_to_all()->set_tiled(tiled);
  return t->Emit1(std::move(op), {x}, loc);
}

Tracer axis_index(AxisNames axes, Loc loc) {
  TraceState* t = internal::CurrentTrace();
  if (t == nullptr) return Tracer();
  ir::Op op;
  op.set_opcode("axis_index");
  ir::AxisAttrs* attrs = op.mutable_axis();
  for (const std::string& a : axes.names) attrs->add_axes(a);
  return t->Emit1(std::move(op), {}, loc);
}

Tracer axis_size(AxisNames axes, Loc loc) {
  TraceState* t = internal::CurrentTrace();
  if (t == nullptr) return Tracer();
  ir::Op op;
  op.set_opcode("axis_size");
  ir::AxisAttrs* attrs = op.mutable_axis();
  for (const std::string& a : axes.names) attrs->add_axes(a);
  return t->Emit1(std::move(op), {}, loc);
}

}  // namespace shardjit
