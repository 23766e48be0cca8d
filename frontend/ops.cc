#include "frontend/ops.h"

#include "fmt/format.h"
#include "frontend/index_normalize.h"
#include "frontend/trace_state.h"
#include "ir/fmt_absl.h"

namespace shardjit {
namespace {

using internal::TraceState;
using internal::TraceOf;

ir::Op MakeOp(const char* opcode) {
  ir::Op op;
  op.set_opcode(opcode);
  return op;
}

Tracer Unary(const char* opcode, Tracer x, Loc loc) {
  TraceState* t = TraceOf({x}, opcode);
  return t ? t->Emit1(MakeOp(opcode), {x}, loc) : Tracer();
}

// The numpy broadcast shape of a and b, or an error.
absl::StatusOr<std::vector<int64_t>> BroadcastShape(const char* opcode, const ShapedType& a,
                                                    const ShapedType& b) {
  size_t rank = std::max(a.dims.size(), b.dims.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.dims.size() ? 1 : a.dims[i - (rank - a.dims.size())];
    int64_t db = i < rank - b.dims.size() ? 1 : b.dims[i - (rank - b.dims.size())];
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: shapes {} and {} do not broadcast", opcode, a.ToString(), b.ToString()));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Applies a binary (or compare) op after numpy broadcasting.
Tracer Binary(ir::Op op, Tracer a, Tracer b, Loc loc) {
  TraceState* t = TraceOf({a, b}, op.opcode().c_str());
  if (t == nullptr || !a.valid() || !b.valid()) return t ? t->Emit1(op, {a, b}, loc) : Tracer();
  if (a.shape() != b.shape()) {
    absl::StatusOr<std::vector<int64_t>> shape =
        BroadcastShape(op.opcode().c_str(), a.type(), b.type());
    if (!shape.ok()) {
      t->RecordError(shape.status(), loc);
      return Tracer();
    }
    if (a.shape() != *shape) a = jnp::broadcast_to(a, *shape, loc);
    if (b.shape() != *shape) b = jnp::broadcast_to(b, *shape, loc);
  }
  return t->Emit1(std::move(op), {a, b}, loc);
}

Tracer Binary(const char* opcode, Tracer a, Tracer b, Loc loc) {
  return Binary(MakeOp(opcode), std::move(a), std::move(b), loc);
}

Tracer Compare(ir::ComparisonDirection direction, Tracer a, Tracer b, Loc loc) {
  ir::Op op = MakeOp("compare");
  op.mutable_compare()->set_direction(direction);
  return Binary(std::move(op), std::move(a), std::move(b), loc);
}

// A weakly typed scalar: a constant of x's dtype.
Tracer Weak(const Tracer& x, double v, Loc loc) {
  if (!x.valid()) return Tracer();
  return x.state()->Constant(v, {x.dtype(), {}}, loc);
}

Tracer Reduce(const char* opcode, Tracer x, std::vector<int64_t> axes, Loc loc) {
  TraceState* t = TraceOf({x}, opcode);
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp(opcode);
  auto* attrs = op.mutable_reduce();
  for (int64_t a : axes) attrs->add_axes(a);
  return t->Emit1(std::move(op), {x}, loc);
}

// The start indices as scalars (constants become s32). With `wrap_negative`, a start i < 0 of
// dimension k becomes i + dims[k] (jax.lax's allow_negative_indices): at trace time for
// constants, by NormalizeIndex for traced integer scalars. Indices of another type or beyond x's
// rank are passed on as they are, for the primitive's shape rule to name (an invalid x has no
// dims).
std::vector<Tracer> IndexTracers(TraceState* t, const std::vector<Index>& indices,
                                 const std::vector<int64_t>& dims, bool wrap_negative, Loc loc) {
  const ShapedType s32_scalar{DType::kS32, {}};
  std::vector<Tracer> out;
  for (size_t k = 0; k < indices.size(); ++k) {
    const Index& i = indices[k];
    const bool wrap = wrap_negative && k < dims.size();
    if (!i.tracer.valid()) {
      const int64_t value = wrap && i.value < 0 ? i.value + dims[k] : i.value;
      out.push_back(t->Constant(static_cast<double>(value), s32_scalar, loc));
    } else if (wrap && i.tracer.rank() == 0 && ir::IsInteger(i.tracer.dtype())) {
      out.push_back(NormalizeIndex(i.tracer, dims[k], loc));
    } else {
      out.push_back(i.tracer);
    }
  }
  return out;
}

TraceState* TraceWithIndices(std::vector<Tracer> operands, const std::vector<Index>& indices,
                             const char* opcode) {
  for (const Index& i : indices) operands.push_back(i.tracer);
  return TraceOf(operands, opcode);
}

}  // namespace

namespace lax {

Tracer add(Tracer a, Tracer b, Loc loc) { return Binary("add", a, b, loc); }
Tracer sub(Tracer a, Tracer b, Loc loc) { return Binary("sub", a, b, loc); }
Tracer mul(Tracer a, Tracer b, Loc loc) { return Binary("mul", a, b, loc); }
Tracer div(Tracer a, Tracer b, Loc loc) { return Binary("div", a, b, loc); }
Tracer rem(Tracer a, Tracer b, Loc loc) { return Binary("rem", a, b, loc); }
Tracer max(Tracer a, Tracer b, Loc loc) { return Binary("max", a, b, loc); }
Tracer min(Tracer a, Tracer b, Loc loc) { return Binary("min", a, b, loc); }
Tracer neg(Tracer x, Loc loc) { return Unary("neg", x, loc); }
Tracer abs(Tracer x, Loc loc) { return Unary("abs", x, loc); }
Tracer exp(Tracer x, Loc loc) { return Unary("exp", x, loc); }
Tracer log(Tracer x, Loc loc) { return Unary("log", x, loc); }
Tracer tanh(Tracer x, Loc loc) { return Unary("tanh", x, loc); }
Tracer sqrt(Tracer x, Loc loc) { return Unary("sqrt", x, loc); }
Tracer rsqrt(Tracer x, Loc loc) { return Unary("rsqrt", x, loc); }
Tracer logistic(Tracer x, Loc loc) { return Unary("logistic", x, loc); }
Tracer sin(Tracer x, Loc loc) { return Unary("sin", x, loc); }
Tracer cos(Tracer x, Loc loc) { return Unary("cos", x, loc); }
Tracer tan(Tracer x, Loc loc) { return Unary("tan", x, loc); }
Tracer erf(Tracer x, Loc loc) { return Unary("erf", x, loc); }
Tracer erf_inv(Tracer x, Loc loc) { return Unary("erf_inv", x, loc); }
Tracer log1p(Tracer x, Loc loc) { return Unary("log1p", x, loc); }
Tracer expm1(Tracer x, Loc loc) { return Unary("expm1", x, loc); }
Tracer floor(Tracer x, Loc loc) { return Unary("floor", x, loc); }
Tracer ceil(Tracer x, Loc loc) { return Unary("ceil", x, loc); }
Tracer round(Tracer x, RoundingMethod rounding_method, Loc loc) {
  TraceState* t = TraceOf({x}, "round");
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp("round");
  op.mutable_round()->set_rounding_method(rounding_method == RoundingMethod::kToNearestEven
                                              ? ir::TO_NEAREST_EVEN
                                              : ir::AWAY_FROM_ZERO);
  return t->Emit1(std::move(op), {x}, loc);
}
Tracer is_finite(Tracer x, Loc loc) { return Unary("is_finite", x, loc); }
Tracer pow(Tracer x, Tracer y, Loc loc) { return Binary("pow", x, y, loc); }
Tracer atan2(Tracer y, Tracer x, Loc loc) { return Binary("atan2", y, x, loc); }
Tracer nextafter(Tracer x, Tracer y, Loc loc) { return Binary("nextafter", x, y, loc); }
Tracer sign(Tracer x, Loc loc) { return Unary("sign", x, loc); }
Tracer integer_pow(Tracer x, int64_t y, Loc loc) {
  TraceState* t = TraceOf({x}, "integer_pow");
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp("integer_pow");
  op.mutable_integer_pow()->set_y(y);
  return t->Emit1(std::move(op), {x}, loc);
}
Tracer bitwise_and(Tracer a, Tracer b, Loc loc) { return Binary("and", a, b, loc); }
Tracer bitwise_or(Tracer a, Tracer b, Loc loc) { return Binary("or", a, b, loc); }
Tracer bitwise_xor(Tracer a, Tracer b, Loc loc) { return Binary("xor", a, b, loc); }
Tracer bitwise_not(Tracer x, Loc loc) { return Unary("not", x, loc); }
Tracer shift_left(Tracer x, Tracer n, Loc loc) { return Binary("shift_left", x, n, loc); }
Tracer shift_right_logical(Tracer x, Tracer n, Loc loc) {
  return Binary("shift_right_logical", x, n, loc);
}
Tracer shift_right_arithmetic(Tracer x, Tracer n, Loc loc) {
  return Binary("shift_right_arithmetic", x, n, loc);
}
Tracer population_count(Tracer x, Loc loc) { return Unary("population_count", x, loc); }
Tracer eq(Tracer a, Tracer b, Loc loc) { return Compare(ir::EQ, a, b, loc); }
Tracer ne(Tracer a, Tracer b, Loc loc) { return Compare(ir::NE, a, b, loc); }
Tracer lt(Tracer a, Tracer b, Loc loc) { return Compare(ir::LT, a, b, loc); }
Tracer le(Tracer a, Tracer b, Loc loc) { return Compare(ir::LE, a, b, loc); }
Tracer gt(Tracer a, Tracer b, Loc loc) { return Compare(ir::GT, a, b, loc); }
Tracer ge(Tracer a, Tracer b, Loc loc) { return Compare(ir::GE, a, b, loc); }

Tracer convert_element_type(Tracer x, DType new_dtype, Loc loc) {
  TraceState* t = TraceOf({x}, "convert_element_type");
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp("convert_element_type");
  op.mutable_convert_element_type()->set_new_dtype(ir::ToProto(new_dtype));
  return t->Emit1(std::move(op), {x}, loc);
}

Tracer bitcast_convert_type(Tracer x, DType new_dtype, Loc loc) {
  TraceState* t = TraceOf({x}, "bitcast_convert_type");
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp("bitcast_convert_type");
  op.mutable_convert_element_type()->set_new_dtype(ir::ToProto(new_dtype));
  return t->Emit1(std::move(op), {x}, loc);
}

std::pair<Tracer, Tracer> threefry2x32(Tracer k0, Tracer k1, Tracer x0, Tracer x1, Loc loc) {
  TraceState* t = TraceOf({k0, k1, x0, x1}, "threefry2x32");
  if (t == nullptr) return {};
  std::vector<Tracer> out = t->EmitN(MakeOp("threefry2x32"), {k0, k1, x0, x1}, 2, loc);
  return {out[0], out[1]};
}

Tracer select(Tracer pred, Tracer on_true, Tracer on_false, Loc loc) {
  TraceState* t = TraceOf({pred, on_true, on_false}, "select");
  return t ? t->Emit1(MakeOp("select"), {pred, on_true, on_false}, loc) : Tracer();
}

Tracer full(std::vector<int64_t> shape, double value, DType dtype, Loc loc) {
  TraceState* t = internal::CurrentTrace();
  return t ? t->Constant(value, {dtype, std::move(shape)}, loc) : Tracer();
}

Tracer scalar(double value, DType dtype, Loc loc) { return full({}, value, dtype, loc); }

Tracer broadcasted_iota(DType dtype, std::vector<int64_t> shape, int64_t dimension, Loc loc) {
  TraceState* t = internal::CurrentTrace();
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp("iota");
  op.mutable_iota()->set_dtype(ir::ToProto(dtype));
  for (int64_t d : shape) op.mutable_iota()->add_shape(d);
  op.mutable_iota()->set_dimension(dimension);
  return t->Emit1(std::move(op), {}, loc);
}

Tracer broadcast_in_dim(Tracer x, std::vector<int64_t> shape,
                        std::vector<int64_t> broadcast_dimensions, Loc loc) {
  TraceState* t = TraceOf({x}, "broadcast_in_dim");
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp("broadcast_in_dim");
  auto* attrs = op.mutable_broadcast_in_dim();
  for (int64_t d : shape) attrs->add_shape(d);
  for (int64_t d : broadcast_dimensions) attrs->add_broadcast_dimensions(d);
  return t->Emit1(std::move(op), {x}, loc);
}

}  // namespace lax

namespace jnp {

Tracer broadcast_to(Tracer x, std::vector<int64_t> shape, Loc loc) {
  if (!x.valid()) return Tracer();
  std::vector<int64_t> dims;
  int64_t offset = static_cast<int64_t>(shape.size()) - x.rank();
  for (int64_t i = 0; i < x.rank(); ++i) dims.push_back(offset + i);
  if (offset < 0) {
    x.state()->RecordError(absl::InvalidArgumentError(fmt::format(
                               "broadcast_to: cannot broadcast {} to rank {}",
                               x.type().ToString(), shape.size())),
                           loc);
    return Tracer();
  }
  return lax::broadcast_in_dim(x, std::move(shape), std::move(dims), loc);
}

}  // namespace jnp

namespace lax {

Tracer reshape(Tracer x, std::vector<int64_t> new_sizes, Loc loc) {
  TraceState* t = TraceOf({x}, "reshape");
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp("reshape");
  auto* attrs = op.mutable_reshape();
  for (int64_t d : new_sizes) attrs->add_new_sizes(d);
  return t->Emit1(std::move(op), {x}, loc);
}

Tracer transpose(Tracer x, std::vector<int64_t> permutation, Loc loc) {
  TraceState* t = TraceOf({x}, "transpose");
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp("transpose");
  auto* attrs = op.mutable_transpose();
  for (int64_t d : permutation) attrs->add_permutation(d);
  return t->Emit1(std::move(op), {x}, loc);
}

Tracer slice(Tracer x, std::vector<int64_t> start_indices, std::vector<int64_t> limit_indices,
             std::vector<int64_t> strides, Loc loc) {
  TraceState* t = TraceOf({x}, "slice");
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp("slice");
  auto* a = op.mutable_slice();
  for (int64_t d : start_indices) a->add_start_indices(d);
  for (int64_t d : limit_indices) a->add_limit_indices(d);
  for (int64_t d : strides) a->add_strides(d);
  return t->Emit1(std::move(op), {x}, loc);
}

Tracer dynamic_slice(Tracer x, std::vector<Index> start_indices, std::vector<int64_t> slice_sizes,
                     bool allow_negative_indices, Loc loc) {
  TraceState* t = TraceWithIndices({x}, start_indices, "dynamic_slice");
  if (t == nullptr) return Tracer();
  std::vector<Tracer> operands = {x};
  for (Tracer& i : IndexTracers(t, start_indices, x.shape(), allow_negative_indices, loc)) {
    operands.push_back(i);
  }
  ir::Op op = MakeOp("dynamic_slice");
  auto* attrs = op.mutable_dynamic_slice();
  for (int64_t d : slice_sizes) attrs->add_slice_sizes(d);
  return t->Emit1(std::move(op), operands, loc);
}

Tracer dynamic_update_slice(Tracer x, Tracer update, std::vector<Index> start_indices,
                            bool allow_negative_indices, Loc loc) {
  TraceState* t = TraceWithIndices({x, update}, start_indices, "dynamic_update_slice");
  if (t == nullptr) return Tracer();
  std::vector<Tracer> operands = {x, update};
  for (Tracer& i : IndexTracers(t, start_indices, x.shape(), allow_negative_indices, loc)) {
    operands.push_back(i);
  }
  return t->Emit1(MakeOp("dynamic_update_slice"), operands, loc);
}

Tracer concatenate(std::vector<Tracer> operands, int64_t dimension, Loc loc) {
  TraceState* t = TraceOf(operands, "concatenate");
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp("concatenate");
  op.mutable_concatenate()->set_dimension(dimension);
  return t->Emit1(std::move(op), operands, loc);
}

Tracer pad(Tracer x, Tracer padding_value, std::vector<PaddingConfig> padding_config, Loc loc) {
  TraceState* t = TraceOf({x, padding_value}, "pad");
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp("pad");
  op.mutable_pad();
  for (const PaddingConfig& c : padding_config) {
    ir::PaddingConfigDim* d = op.mutable_pad()->add_padding_config();
    d->set_low(c.low);
    d->set_high(c.high);
    d->set_interior(c.interior);
  }
  return t->Emit1(std::move(op), {x, padding_value}, loc);
}

Tracer pad(Tracer x, double padding_value, std::vector<PaddingConfig> padding_config, Loc loc) {
  return pad(x, Weak(x, padding_value, loc), std::move(padding_config), loc);
}

Tracer rev(Tracer x, std::vector<int64_t> dimensions, Loc loc) {
  TraceState* t = TraceOf({x}, "rev");
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp("rev");
  op.mutable_rev();
  for (int64_t d : dimensions) op.mutable_rev()->add_dimensions(d);
  return t->Emit1(std::move(op), {x}, loc);
}

Tracer clamp(Tracer min, Tracer x, Tracer max, Loc loc) {
  TraceState* t = TraceOf({min, x, max}, "clamp");
  return t ? t->Emit1(MakeOp("clamp"), {min, x, max}, loc) : Tracer();
}

Tracer clamp(double min, Tracer x, double max, Loc loc) {
  return clamp(Weak(x, min, loc), x, Weak(x, max, loc), loc);
}

Tracer with_sharding_constraint(Tracer x, PartitionSpec spec, Loc loc) {
  TraceState* t = TraceOf({x}, "with_sharding_constraint");
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp("with_sharding_constraint");
  *op.mutable_with_sharding_constraint()->mutable_sharding() = spec.proto();
  return t->Emit1(std::move(op), {x}, loc);
}

Tracer reduce_sum(Tracer x, std::vector<int64_t> axes, Loc loc) {
  return Reduce("reduce_sum", x, std::move(axes), loc);
}
Tracer reduce_max(Tracer x, std::vector<int64_t> axes, Loc loc) {
  return Reduce("reduce_max", x, std::move(axes), loc);
}
Tracer reduce_min(Tracer x, std::vector<int64_t> axes, Loc loc) {
  return Reduce("reduce_min", x, std::move(axes), loc);
}
Tracer reduce_prod(Tracer x, std::vector<int64_t> axes, Loc loc) {
  return Reduce("reduce_prod", x, std::move(axes), loc);
}
Tracer reduce_and(Tracer x, std::vector<int64_t> axes, Loc loc) {
  return Reduce("reduce_and", x, std::move(axes), loc);
}
Tracer reduce_or(Tracer x, std::vector<int64_t> axes, Loc loc) {
  return Reduce("reduce_or", x, std::move(axes), loc);
}

Tracer dot_general(Tracer lhs, Tracer rhs, DotDims dims, DType preferred_element_type, Loc loc) {
  TraceState* t = TraceOf({lhs, rhs}, "dot_general");
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp("dot_general");
  auto* a = op.mutable_dot_general();
  for (int64_t d : dims.lhs_contracting) a->add_lhs_contracting_dims(d);
  for (int64_t d : dims.rhs_contracting) a->add_rhs_contracting_dims(d);
  for (int64_t d : dims.lhs_batch) a->add_lhs_batch_dims(d);
  for (int64_t d : dims.rhs_batch) a->add_rhs_batch_dims(d);
  a->set_preferred_element_type(ir::ToProto(preferred_element_type));
  return t->Emit1(std::move(op), {lhs, rhs}, loc);
}

}  // namespace lax

namespace jnp {

Tracer matmul(Tracer lhs, Tracer rhs, Loc loc) {
  if (!lhs.valid() || !rhs.valid()) return Tracer();
  const int64_t lr = lhs.rank(), rr = rhs.rank();
  if (lr == 0 || rr == 0) {
    lhs.state()->RecordError(
        absl::InvalidArgumentError(fmt::format(
            "matmul: input operand {} must have ndim at least 1, but it has ndim 0; operands {}, "
            "{}", lr == 0 ? 0 : 1, lhs.type().ToString(), rhs.type().ToString())),
        loc);
    return Tracer();
  }
  if (lr == 1 && rr == 1) {
    return lax::dot_general(lhs, rhs, DotDims{{0}, {0}}, DType::kInvalid, loc);
  }
  // A vector operand is a matrix of one row (lhs) or column (rhs), that dimension dropped after.
  if (lr == 1 || rr == 1) {
    Tracer l = lr == 1 ? lax::reshape(lhs, {1, lhs.shape()[0]}, loc) : lhs;
    Tracer r = rr == 1 ? lax::reshape(rhs, {rhs.shape()[0], 1}, loc) : rhs;
    Tracer out = matmul(l, r, loc);
    if (!out.valid()) return out;
    std::vector<int64_t> dims = out.shape();
    dims.erase(dims.end() - (lr == 1 ? 2 : 1));
    return lax::reshape(out, dims, loc);
  }
  if (lr == 2 && rr == 2) {
    return lax::dot_general(lhs, rhs, DotDims{{1}, {0}}, DType::kInvalid, loc);
  }
  // Stacks of matrices: the leading dimensions broadcast against each other (numpy's rules),
  // then one batched product.
  const ShapedType lb{lhs.dtype(), {lhs.shape().begin(), lhs.shape().end() - 2}};
  const ShapedType rb{rhs.dtype(), {rhs.shape().begin(), rhs.shape().end() - 2}};
  absl::StatusOr<std::vector<int64_t>> broadcast = BroadcastShape("matmul", lb, rb);
  if (!broadcast.ok()) {
    lhs.state()->RecordError(
        absl::InvalidArgumentError(
            fmt::format("matmul: the batch dimensions of {} and {} do not broadcast together",
                        lhs.type().ToString(), rhs.type().ToString())),
        loc);
    return Tracer();
  }
  const std::vector<int64_t>& batch = *broadcast;
  const size_t nb = batch.size();
  auto full = [&](Tracer x) {
    std::vector<int64_t> shape = batch;
    shape.insert(shape.end(), x.shape().end() - 2, x.shape().end());
    return shape == x.shape() ? x : broadcast_to(x, shape, loc);
  };
  const int64_t n = static_cast<int64_t>(nb);
  DotDims dims{{n + 1}, {n}};
  for (int64_t i = 0; i < n; ++i) {
    dims.lhs_batch.push_back(i);
    dims.rhs_batch.push_back(i);
  }
  return lax::dot_general(full(lhs), full(rhs), dims, DType::kInvalid, loc);
}

}  // namespace jnp

namespace {

Tracer GroupedMatmul(const char* opcode, Tracer lhs, Tracer rhs, Tracer group_sizes,
                     DType preferred_element_type, Tracer group_offset, bool transpose_rhs,
                     int64_t num_actual_groups, Loc loc) {
  std::vector<Tracer> operands = {lhs, rhs, group_sizes};
  if (group_offset.valid()) operands.push_back(group_offset);
  TraceState* t = TraceOf(operands, opcode);
  if (t == nullptr) return Tracer();
  ir::Op op = MakeOp(opcode);
  auto* a = op.mutable_grouped_matmul();
  a->set_transpose_rhs(transpose_rhs);
  a->set_preferred_element_type(ir::ToProto(preferred_element_type));
  a->set_num_actual_groups(num_actual_groups);
  return t->Emit1(std::move(op), operands, loc);
}

}  // namespace

namespace lax {

Tracer gmm(Tracer lhs, Tracer rhs, Tracer group_sizes, DType preferred_element_type,
           Tracer group_offset, bool transpose_rhs, Loc loc) {
  return GroupedMatmul("gmm", lhs, rhs, group_sizes, preferred_element_type, group_offset,
                       transpose_rhs, 0, loc);
}

Tracer tgmm(Tracer lhs, Tracer rhs, Tracer group_sizes, DType preferred_element_type,
            Tracer group_offset, int64_t num_actual_groups, Loc loc) {
  if (num_actual_groups < 0 && group_sizes.valid() && group_sizes.rank() == 1) {
    num_actual_groups = group_sizes.shape()[0];
  }
  return GroupedMatmul("tgmm", lhs, rhs, group_sizes, preferred_element_type, group_offset,
                       false, num_actual_groups, loc);
}

}  // namespace lax

namespace {

// a and b converted to their promoted dtype.
std::pair<Tracer, Tracer> Promoted(Tracer a, Tracer b) {
  if (!a.valid() || !b.valid()) return {a, b};
  const DType d = jnp::promote_types(a.dtype(), b.dtype());
  if (a.dtype() != d) a = lax::convert_element_type(a, d, Loc());
  if (b.dtype() != d) b = lax::convert_element_type(b, d, Loc());
  return {a, b};
}

// x and the scalar c as a constant, both of promote_weak(x's dtype, c's kind).
std::pair<Tracer, Tracer> WithScalar(Tracer x, Scalar c) {
  if (!x.valid()) return {x, Tracer()};
  if (!c.exact) {
    x.state()->RecordError(
        absl::InvalidArgumentError(fmt::format(
            "integer scalar {} is beyond 2^53 and has no exact constant (use a traced operand)",
            c.value)),
        Loc());
    return {Tracer(), Tracer()};
  }
  internal::TraceState* t = x.state();
  const DType d = jnp::promote_weak(x.dtype(), c.kind);
  if (x.dtype() != d) x = lax::convert_element_type(x, d, Loc());
  return {x, t->Constant(c.value, {d, {}}, Loc())};
}

template <Tracer (*kOp)(Tracer, Tracer, Loc)>
Tracer Apply(Tracer a, Tracer b) {
  auto [x, y] = Promoted(a, b);
  return kOp(x, y, Loc());
}

template <Tracer (*kOp)(Tracer, Tracer, Loc)>
Tracer Apply(Tracer a, Scalar b) {
  auto [x, y] = WithScalar(a, b);
  return kOp(x, y, Loc());
}

template <Tracer (*kOp)(Tracer, Tracer, Loc)>
Tracer Apply(Scalar a, Tracer b) {
  auto [y, x] = WithScalar(b, a);
  return kOp(x, y, Loc());
}

}  // namespace

Tracer operator+(Tracer a, Tracer b) { return Apply<lax::add>(a, b); }
Tracer operator-(Tracer a, Tracer b) { return Apply<lax::sub>(a, b); }
Tracer operator*(Tracer a, Tracer b) { return Apply<lax::mul>(a, b); }
Tracer operator/(Tracer a, Tracer b) { return Apply<lax::div>(a, b); }
Tracer operator%(Tracer a, Tracer b) { return Apply<lax::rem>(a, b); }
Tracer operator-(Tracer x) { return lax::neg(x, Loc()); }
Tracer operator<(Tracer a, Tracer b) { return Apply<lax::lt>(a, b); }
Tracer operator<=(Tracer a, Tracer b) { return Apply<lax::le>(a, b); }
Tracer operator>(Tracer a, Tracer b) { return Apply<lax::gt>(a, b); }
Tracer operator>=(Tracer a, Tracer b) { return Apply<lax::ge>(a, b); }
Tracer operator+(Tracer a, Scalar b) { return Apply<lax::add>(a, b); }
Tracer operator-(Tracer a, Scalar b) { return Apply<lax::sub>(a, b); }
Tracer operator*(Tracer a, Scalar b) { return Apply<lax::mul>(a, b); }
Tracer operator/(Tracer a, Scalar b) { return Apply<lax::div>(a, b); }
Tracer operator%(Tracer a, Scalar b) { return Apply<lax::rem>(a, b); }
Tracer operator<(Tracer a, Scalar b) { return Apply<lax::lt>(a, b); }
Tracer operator<=(Tracer a, Scalar b) { return Apply<lax::le>(a, b); }
Tracer operator>(Tracer a, Scalar b) { return Apply<lax::gt>(a, b); }
Tracer operator>=(Tracer a, Scalar b) { return Apply<lax::ge>(a, b); }
Tracer operator+(Scalar a, Tracer b) { return Apply<lax::add>(a, b); }
Tracer operator-(Scalar a, Tracer b) { return Apply<lax::sub>(a, b); }
Tracer operator*(Scalar a, Tracer b) { return Apply<lax::mul>(a, b); }
Tracer operator/(Scalar a, Tracer b) { return Apply<lax::div>(a, b); }

}  // namespace shardjit
