#include "frontend/indexing.h"

#include <cmath>
#include <limits>

#include "fmt/format.h"
#include "frontend/index_normalize.h"
#include "frontend/trace_state.h"
#include "ir/fmt_absl.h"

namespace shardjit {
namespace {

using internal::TraceOf;
using internal::TraceState;

ir::GatherScatterMode ToProto(lax::GatherScatterMode mode) {
  return static_cast<ir::GatherScatterMode>(static_cast<int>(mode));
}

// JAX's fill for FILL_OR_DROP gathers: NaN for floats, the smallest signed and the largest
// unsigned integer, true for pred; none for u64, whose 2^64 - 1 has no double (lax::gather sets it
// as the op's fill_bits).
std::optional<double> DefaultFill(DType dtype) {
  if (dtype == DType::kPred) return 1;
  if (dtype == DType::kU64) return std::nullopt;
  if (ir::IsUnsignedInteger(dtype)) return std::ldexp(1.0, 8 * ir::DTypeSize(dtype)) - 1;
  if (ir::IsSignedInteger(dtype)) return -std::ldexp(1.0, 8 * ir::DTypeSize(dtype) - 1);
  return std::nan("");
}

template <typename R>
void SetAll(R* field, const std::vector<int64_t>& values) {
  for (int64_t v : values) field->Add(v);
}

Tracer Scatter(const char* opcode, Tracer operand, Tracer indices, Tracer updates,
               const lax::ScatterDimensionNumbers& d, lax::GatherScatterMode mode, Loc loc) {
  TraceState* t = TraceOf({operand, indices, updates}, opcode);
  if (t == nullptr) return Tracer();
  ir::Op op;
  op.set_opcode(opcode);
  ir::ScatterAttrs* a = op.mutable_scatter();
  SetAll(a->mutable_update_window_dims(), d.update_window_dims);
  SetAll(a->mutable_inserted_window_dims(), d.inserted_window_dims);
  SetAll(a->mutable_scatter_dims_to_operand_dims(), d.scatter_dims_to_operand_dims);
  SetAll(a->mutable_operand_batching_dims(), d.operand_batching_dims);
  SetAll(a->mutable_scatter_indices_batching_dims(), d.scatter_indices_batching_dims);
  a->set_mode(ToProto(mode));
  return t->Emit1(std::move(op), {operand, indices, updates}, loc);
}

// `axis` counted from the end when in [-rank, 0); an error naming `opcode` when out of range.
std::optional<int64_t> Axis(TraceState* t, const char* opcode, int64_t axis, const Tracer& x,
                            Loc loc) {
  const int64_t rank = x.rank();
  if (axis < -rank || axis >= rank) {
    t->RecordError(absl::InvalidArgumentError(fmt::format(
                       "{}: axis={} is out of range for {}", opcode, axis, x.type().ToString())),
                   loc);
    return std::nullopt;
  }
  return axis < 0 ? axis + rank : axis;
}

// The indices, with i < 0 replaced by i + size when `wrap` (NormalizeIndex), and a trailing
// index-vector dimension of 1.
Tracer IndexVector(Tracer indices, int64_t size, bool wrap, Loc loc) {
  if (wrap) indices = NormalizeIndex(indices, size, loc);
  std::vector<int64_t> shape = indices.shape();
  shape.push_back(1);
  return lax::reshape(indices, shape, loc);
}

// Refuses a non-empty set of indices into an empty dimension (jnp.take's IndexError).
bool CheckNotEmpty(TraceState* t, const char* opcode, const Tracer& a, int64_t axis,
                   const Tracer& indices, Loc loc) {
  if (a.shape()[axis] != 0 || indices.type().num_elements() == 0) return true;
  t->RecordError(absl::InvalidArgumentError(fmt::format(
                     "{}: cannot take a non-empty set of indices {} from the empty axis {} of {}",
                     opcode, indices.type().ToString(), axis, a.type().ToString())),
                 loc);
  return false;
}

}  // namespace

Tracer NormalizeIndex(Tracer i, int64_t size, Loc loc) {
  if (!i.valid() || !ir::IsSignedInteger(i.dtype())) return i;
  const int bits = 8 * static_cast<int>(ir::DTypeSize(i.dtype()));
  if (bits < 64 && size > (int64_t{1} << (bits - 1)) - 1) {
    i = lax::convert_element_type(i, DType::kS32, loc);
  }
  const DType dtype = i.dtype();
  Tracer zero = lax::full(i.shape(), 0, dtype, loc);
  Tracer n = lax::full(i.shape(), static_cast<double>(size), dtype, loc);
  return lax::select(lax::lt(i, zero, loc), lax::add(i, n, loc), i, loc);
}

namespace lax {

Tracer gather(Tracer operand, Tracer start_indices, GatherDimensionNumbers d,
              std::vector<int64_t> slice_sizes, GatherScatterMode mode,
              std::optional<double> fill_value, Loc loc) {
  TraceState* t = TraceOf({operand, start_indices}, "gather");
  if (t == nullptr || !operand.valid()) return Tracer();
  ir::Op op;
  op.set_opcode("gather");
  ir::GatherAttrs* a = op.mutable_gather();
  SetAll(a->mutable_offset_dims(), d.offset_dims);
  SetAll(a->mutable_collapsed_slice_dims(), d.collapsed_slice_dims);
  SetAll(a->mutable_start_index_map(), d.start_index_map);
  SetAll(a->mutable_operand_batching_dims(), d.operand_batching_dims);
  SetAll(a->mutable_start_indices_batching_dims(), d.start_indices_batching_dims);
  SetAll(a->mutable_slice_sizes(), slice_sizes);
  a->set_mode(ToProto(mode));
  if (!fill_value) fill_value = DefaultFill(operand.dtype());
  if (fill_value) {
    a->set_fill_value(*fill_value);
  } else {
    a->set_fill_bits(~uint64_t{0});  // u64's largest value
  }
  return t->Emit1(std::move(op), {operand, start_indices}, loc);
}

Tracer scatter(Tracer operand, Tracer scatter_indices, Tracer updates,
               ScatterDimensionNumbers dimension_numbers, GatherScatterMode mode, Loc loc) {
  return Scatter("scatter", operand, scatter_indices, updates, dimension_numbers, mode, loc);
}
Tracer scatter_add(Tracer operand, Tracer scatter_indices, Tracer updates,
                   ScatterDimensionNumbers dimension_numbers, GatherScatterMode mode, Loc loc) {
  return Scatter("scatter_add", operand, scatter_indices, updates, dimension_numbers, mode, loc);
}
Tracer scatter_mul(Tracer operand, Tracer scatter_indices, Tracer updates,
                   ScatterDimensionNumbers dimension_numbers, GatherScatterMode mode, Loc loc) {
  return Scatter("scatter_mul", operand, scatter_indices, updates, dimension_numbers, mode, loc);
}
Tracer scatter_min(Tracer operand, Tracer scatter_indices, Tracer updates,
                   ScatterDimensionNumbers dimension_numbers, GatherScatterMode mode, Loc loc) {
  return Scatter("scatter_min", operand, scatter_indices, updates, dimension_numbers, mode, loc);
}
Tracer scatter_max(Tracer operand, Tracer scatter_indices, Tracer updates,
                   ScatterDimensionNumbers dimension_numbers, GatherScatterMode mode, Loc loc) {
  return Scatter("scatter_max", operand, scatter_indices, updates, dimension_numbers, mode, loc);
}

}  // namespace lax

namespace jnp {

Tracer take(Tracer a, Tracer indices, int64_t axis, lax::GatherScatterMode mode, Loc loc) {
  TraceState* t = TraceOf({a, indices}, "take");
  if (t == nullptr || !a.valid() || !indices.valid()) return Tracer();
  const std::optional<int64_t> ax = Axis(t, "take", axis, a, loc);
  if (!ax || !CheckNotEmpty(t, "take", a, *ax, indices, loc)) return Tracer();
  const int64_t rank = a.rank(), index_rank = indices.rank();
  if (indices.type().num_elements() == 0 || a.shape()[*ax] == 0) {
    std::vector<int64_t> shape(a.shape().begin(), a.shape().begin() + *ax);
    shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
    shape.insert(shape.end(), a.shape().begin() + *ax + 1, a.shape().end());
    return lax::full(shape, 0, a.dtype(), loc);  // nothing to take
  }
  lax::GatherDimensionNumbers d{.collapsed_slice_dims = {*ax}, .start_index_map = {*ax}};
  for (int64_t i = 0; i < *ax; ++i) d.offset_dims.push_back(i);
  for (int64_t i = *ax + index_rank; i < rank + index_rank - 1; ++i) d.offset_dims.push_back(i);
  std::vector<int64_t> sizes = a.shape();
  sizes[*ax] = 1;
  // As jnp.take: negative indices count from the end in the fill mode only (clip clamps them).
  const bool wrap = mode == lax::GatherScatterMode::kFillOrDrop;
  return lax::gather(a, IndexVector(indices, a.shape()[*ax], wrap, loc), d, sizes, mode,
                     std::nullopt, loc);
}

Tracer take_along_axis(Tracer arr, Tracer indices, int64_t axis, lax::GatherScatterMode mode,
                       Loc loc) {
  TraceState* t = TraceOf({arr, indices}, "take_along_axis");
  if (t == nullptr || !arr.valid() || !indices.valid()) return Tracer();
  const std::optional<int64_t> ax = Axis(t, "take_along_axis", axis, arr, loc);
  if (!ax) return Tracer();
  if (indices.rank() != arr.rank()) {
    t->RecordError(absl::InvalidArgumentError(fmt::format(
                       "take_along_axis: indices {} must have the rank of the array {}",
                       indices.type().ToString(), arr.type().ToString())),
                   loc);
    return Tracer();
  }
  // Both broadcast to one shape except along `axis`.
  std::vector<int64_t> arr_shape = arr.shape(), index_shape = indices.shape();
  lax::GatherDimensionNumbers d{.collapsed_slice_dims = {*ax}, .start_index_map = {*ax}};
  for (int64_t i = 0; i < arr.rank(); ++i) {
    if (i == *ax) continue;
    const int64_t n = arr_shape[i], m = index_shape[i];
    if (n != m && n != 1 && m != 1) {
      t->RecordError(absl::InvalidArgumentError(fmt::format(
                         "take_along_axis: indices {} and array {} do not broadcast in "
                         "dimension {}",
                         indices.type().ToString(), arr.type().ToString(), i)),
                     loc);
      return Tracer();
    }
    arr_shape[i] = index_shape[i] = n == 1 ? m : n;
    d.operand_batching_dims.push_back(i);
    d.start_indices_batching_dims.push_back(i);
  }
  if (arr_shape != arr.shape()) arr = jnp::broadcast_to(arr, arr_shape, loc);
  if (index_shape != indices.shape()) indices = jnp::broadcast_to(indices, index_shape, loc);
  if (!CheckNotEmpty(t, "take_along_axis", arr, *ax, indices, loc)) return Tracer();
  if (indices.type().num_elements() == 0) return lax::full(index_shape, 0, arr.dtype(), loc);
  std::vector<int64_t> sizes(arr.rank(), 1);
  // As jnp.take_along_axis: negative indices count from the end unless in bounds is promised.
  const bool wrap = mode != lax::GatherScatterMode::kPromiseInBounds;
  return lax::gather(arr, IndexVector(indices, arr_shape[*ax], wrap, loc), d, sizes, mode,
                     std::nullopt, loc);
}

}  // namespace jnp
}  // namespace shardjit
