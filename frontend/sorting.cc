#include "frontend/sorting.h"

#include "frontend/trace_state.h"

namespace shardjit {
namespace {

using internal::TraceOf;
using internal::TraceState;

// `axis` counted from the end when it is in [-rank, 0); anything else is left for the shape rule
// to name.
int64_t NormalizeAxis(int64_t axis, const Tracer& x) {
  return x.valid() && axis < 0 && axis >= -x.rank() ? axis + x.rank() : axis;
}

Tracer ArgMinMax(const char* opcode, Tracer x, int64_t axis, DType index_dtype, Loc loc) {
  ir::Op op;
  op.set_opcode(opcode);
  op.mutable_arg_min_max()->set_axis(NormalizeAxis(axis, x));
  op.mutable_arg_min_max()->set_index_dtype(ir::ToProto(index_dtype));
  TraceState* t = TraceOf({x}, opcode);
  return t ? t->Emit1(std::move(op), {x}, loc) : Tracer();
}

Tracer Cumulative(const char* opcode, Tracer x, int64_t axis, bool reverse, Loc loc) {
  ir::Op op;
  op.set_opcode(opcode);
  op.mutable_cumulative()->set_axis(NormalizeAxis(axis, x));
  op.mutable_cumulative()->set_reverse(reverse);
  TraceState* t = TraceOf({x}, opcode);
  return t ? t->Emit1(std::move(op), {x}, loc) : Tracer();
}

}  // namespace

namespace lax {

std::vector<Tracer> sort(std::vector<Tracer> operands, int64_t dimension, bool is_stable,
                         int64_t num_keys, Loc loc) {
  ir::Op op;
  op.set_opcode("sort");
  op.mutable_sort()->set_dimension(
      operands.empty() ? dimension : NormalizeAxis(dimension, operands[0]));
  op.mutable_sort()->set_is_stable(is_stable);
  op.mutable_sort()->set_num_keys(num_keys);
  TraceState* t = TraceOf(operands, "sort");
  return t ? t->EmitN(std::move(op), operands, operands.size(), loc)
           : std::vector<Tracer>(operands.size());
}

Tracer sort(Tracer operand, int64_t dimension, bool is_stable, Loc loc) {
  return sort(std::vector<Tracer>{std::move(operand)}, dimension, is_stable, 1, loc)[0];
}

std::pair<Tracer, Tracer> sort_key_val(Tracer keys, Tracer values, int64_t dimension,
                                       bool is_stable, Loc loc) {
  std::vector<Tracer> out = sort({std::move(keys), std::move(values)}, dimension, is_stable, 1, loc);
  return {out[0], out[1]};
}

std::pair<Tracer, Tracer> top_k(Tracer operand, int64_t k, int64_t axis, Loc loc) {
  ir::Op op;
  op.set_opcode("top_k");
  op.mutable_top_k()->set_k(k);
  op.mutable_top_k()->set_axis(NormalizeAxis(axis, operand));
  TraceState* t = TraceOf({operand}, "top_k");
  if (t == nullptr) return {};
  std::vector<Tracer> out = t->EmitN(std::move(op), {operand}, 2, loc);
  return {out[0], out[1]};
}

Tracer argmax(Tracer operand, int64_t axis, DType index_dtype, Loc loc) {
  return ArgMinMax("argmax", std::move(operand), axis, index_dtype, loc);
}
Tracer argmin(Tracer operand, int64_t axis, DType index_dtype, Loc loc) {
  return ArgMinMax("argmin", std::move(operand), axis, index_dtype, loc);
}

Tracer cumsum(Tracer operand, int64_t axis, bool reverse, Loc loc) {
  return Cumulative("cumsum", std::move(operand), axis, reverse, loc);
}
Tracer cumprod(Tracer operand, int64_t axis, bool reverse, Loc loc) {
  return Cumulative("cumprod", std::move(operand), axis, reverse, loc);
}
Tracer cummax(Tracer operand, int64_t axis, bool reverse, Loc loc) {
  return Cumulative("cummax", std::move(operand), axis, reverse, loc);
}
Tracer cummin(Tracer operand, int64_t axis, bool reverse, Loc loc) {
  return Cumulative("cummin", std::move(operand), axis, reverse, loc);
}

}  // namespace lax

namespace jnp {

Tracer argsort(Tracer x, int64_t axis, bool stable, bool descending, Loc loc) {
  if (!x.valid()) return Tracer();
  axis = NormalizeAxis(axis, x);
  if (axis < 0 || axis >= x.rank()) {
    // Out of range: the sort's shape rule names the axis.
    return lax::sort_key_val(x, x, axis, stable, loc).second;
  }
  Tracer iota = lax::broadcasted_iota(DType::kS32, x.shape(), axis, loc);
  if (!descending) return lax::sort_key_val(x, iota, axis, stable, loc).second;
  // Largest first with ties in their original order: sort the reversed lane ascending, carrying
  // reversed indices, and reverse the result.
  Tracer indices = lax::sort_key_val(lax::rev(x, {axis}, loc), lax::rev(iota, {axis}, loc), axis,
                                     stable, loc)
                       .second;
  return lax::rev(indices, {axis}, loc);
}

}  // namespace jnp
}  // namespace shardjit
