// Local primitives on tracers: `lax::` holds jax.lax's, `jnp::` the jax.numpy helpers built on
// them. lax's binary arithmetic broadcasts like numpy; its operand dtypes must agree, as in
// jax.lax. The Tracer operators (+, -, *, /, %, <, ...) promote dtypes as jax.numpy does and take
// C++ scalars as weakly typed constants; they stay in `shardjit`, so `using namespace shardjit;`
// clashes with nothing of <cmath>.
#ifndef SHARDJIT_FRONTEND_OPS_H_
#define SHARDJIT_FRONTEND_OPS_H_

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "frontend/dtypes.h"
#include "frontend/tracer.h"

namespace shardjit {

using Loc = SourceLocation;

// dot_general dimension numbers: ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)).
struct DotDims {
  std::vector<int64_t> lhs_contracting;
  std::vector<int64_t> rhs_contracting;
  std::vector<int64_t> lhs_batch = {};
  std::vector<int64_t> rhs_batch = {};
};

namespace lax {

// Elementwise.
Tracer add(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer sub(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer mul(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer div(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer rem(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer max(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer min(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer neg(Tracer x, Loc loc = Loc::current());
Tracer abs(Tracer x, Loc loc = Loc::current());
Tracer exp(Tracer x, Loc loc = Loc::current());
Tracer log(Tracer x, Loc loc = Loc::current());
Tracer tanh(Tracer x, Loc loc = Loc::current());
Tracer sqrt(Tracer x, Loc loc = Loc::current());
Tracer rsqrt(Tracer x, Loc loc = Loc::current());
Tracer logistic(Tracer x, Loc loc = Loc::current());

// Math (floats), to within the accuracy docs/api.md states (Numerics).
Tracer sin(Tracer x, Loc loc = Loc::current());
Tracer cos(Tracer x, Loc loc = Loc::current());
Tracer tan(Tracer x, Loc loc = Loc::current());
Tracer erf(Tracer x, Loc loc = Loc::current());
Tracer erf_inv(Tracer x, Loc loc = Loc::current());
Tracer log1p(Tracer x, Loc loc = Loc::current());
Tracer expm1(Tracer x, Loc loc = Loc::current());
Tracer floor(Tracer x, Loc loc = Loc::current());
Tracer ceil(Tracer x, Loc loc = Loc::current());
// jax.lax.RoundingMethod: halfway cases away from zero (lax.round's default) or to even.
enum class RoundingMethod { kAwayFromZero = 0, kToNearestEven = 1 };
Tracer round(Tracer x, RoundingMethod rounding_method = RoundingMethod::kAwayFromZero,
             Loc loc = Loc::current());
Tracer is_finite(Tracer x, Loc loc = Loc::current());
Tracer pow(Tracer x, Tracer y, Loc loc = Loc::current());
Tracer atan2(Tracer y, Tracer x, Loc loc = Loc::current());
Tracer nextafter(Tracer x, Tracer y, Loc loc = Loc::current());
// Floats and s32: sign (-1, 0 or 1; -0, +0 and NaN are their own sign) and x ** y for a constant
// integer y (by repeated multiplication; y < 0 only for floats).
Tracer sign(Tracer x, Loc loc = Loc::current());
Tracer integer_pow(Tracer x, int64_t y, Loc loc = Loc::current());

// Bits (s32; and/or/xor/not also pred). Shifts by an amount outside [0, 32) give 0, or the
// sign bits for shift_right_arithmetic.
Tracer bitwise_and(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer bitwise_or(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer bitwise_xor(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer bitwise_not(Tracer x, Loc loc = Loc::current());
Tracer shift_left(Tracer x, Tracer n, Loc loc = Loc::current());
Tracer shift_right_logical(Tracer x, Tracer n, Loc loc = Loc::current());
Tracer shift_right_arithmetic(Tracer x, Tracer n, Loc loc = Loc::current());
Tracer population_count(Tracer x, Loc loc = Loc::current());
Tracer convert_element_type(Tracer x, DType new_dtype, Loc loc = Loc::current());
// The same bits read as `new_dtype`, of the same width (f32 <-> s32).
Tracer bitcast_convert_type(Tracer x, DType new_dtype, Loc loc = Loc::current());
// jax.random's threefry2x32 hash on u32 words: key (k0, k1), counter (x0, x1), all of one
// shape; returns the two hashed words.
std::pair<Tracer, Tracer> threefry2x32(Tracer k0, Tracer k1, Tracer x0, Tracer x1,
                                       Loc loc = Loc::current());
Tracer eq(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer ne(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer lt(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer le(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer gt(Tracer a, Tracer b, Loc loc = Loc::current());
Tracer ge(Tracer a, Tracer b, Loc loc = Loc::current());
// pred ? on_true : on_false, elementwise (pred may be a scalar).
Tracer select(Tracer pred, Tracer on_true, Tracer on_false, Loc loc = Loc::current());

// A scalar or filled constant in the current trace.
Tracer full(std::vector<int64_t> shape, double value, DType dtype, Loc loc = Loc::current());
Tracer scalar(double value, DType dtype, Loc loc = Loc::current());
// jax.lax.broadcasted_iota: the index along `dimension` at every element of `shape`.
Tracer broadcasted_iota(DType dtype, std::vector<int64_t> shape, int64_t dimension,
                        Loc loc = Loc::current());

// Shape and data movement.
Tracer broadcast_in_dim(Tracer x, std::vector<int64_t> shape,
                        std::vector<int64_t> broadcast_dimensions, Loc loc = Loc::current());
Tracer reshape(Tracer x, std::vector<int64_t> new_sizes, Loc loc = Loc::current());
Tracer transpose(Tracer x, std::vector<int64_t> permutation, Loc loc = Loc::current());
Tracer slice(Tracer x, std::vector<int64_t> start_indices, std::vector<int64_t> limit_indices,
             std::vector<int64_t> strides = {}, Loc loc = Loc::current());
// jax.lax.dynamic_slice / dynamic_update_slice: with `allow_negative_indices` (JAX's default) a
// negative start i of a dimension of size d means i + d; starts are then clamped so that the
// slice lies inside x, as XLA does.
Tracer dynamic_slice(Tracer x, std::vector<Index> start_indices, std::vector<int64_t> slice_sizes,
                     bool allow_negative_indices = true, Loc loc = Loc::current());
Tracer dynamic_update_slice(Tracer x, Tracer update, std::vector<Index> start_indices,
                            bool allow_negative_indices = true, Loc loc = Loc::current());
Tracer concatenate(std::vector<Tracer> operands, int64_t dimension, Loc loc = Loc::current());
// One dimension of lax::pad's padding_config: elements added before, after and between every
// two (low and high may be negative, removing elements).
struct PaddingConfig {
  int64_t low = 0;
  int64_t high = 0;
  int64_t interior = 0;
};
// jax.lax.pad: `padding_value` (a scalar of x's dtype) fills what the padding adds.
Tracer pad(Tracer x, Tracer padding_value, std::vector<PaddingConfig> padding_config,
           Loc loc = Loc::current());
Tracer pad(Tracer x, double padding_value, std::vector<PaddingConfig> padding_config,
           Loc loc = Loc::current());
// jax.lax.rev: x reversed along `dimensions`.
Tracer rev(Tracer x, std::vector<int64_t> dimensions, Loc loc = Loc::current());
// jax.lax.clamp: min(max(x, min), max) elementwise; the bounds are scalars or of x's shape.
Tracer clamp(Tracer min, Tracer x, Tracer max, Loc loc = Loc::current());
Tracer clamp(double min, Tracer x, double max, Loc loc = Loc::current());
// jax.lax.with_sharding_constraint: x itself, which the SPMD partitioner lays out by `spec` (on
// the trace's mesh) at this point of a global-view program.
Tracer with_sharding_constraint(Tracer x, PartitionSpec spec, Loc loc = Loc::current());

// Reductions over `axes`.
Tracer reduce_sum(Tracer x, std::vector<int64_t> axes, Loc loc = Loc::current());
Tracer reduce_max(Tracer x, std::vector<int64_t> axes, Loc loc = Loc::current());
Tracer reduce_min(Tracer x, std::vector<int64_t> axes, Loc loc = Loc::current());
Tracer reduce_prod(Tracer x, std::vector<int64_t> axes, Loc loc = Loc::current());
// Bitwise over pred or s32.
Tracer reduce_and(Tracer x, std::vector<int64_t> axes, Loc loc = Loc::current());
Tracer reduce_or(Tracer x, std::vector<int64_t> axes, Loc loc = Loc::current());

// kInvalid preferred_element_type: the operands' dtype.
Tracer dot_general(Tracer lhs, Tracer rhs, DotDims dims,
                   DType preferred_element_type = DType::kInvalid, Loc loc = Loc::current());

// Grouped matmuls (megablox, seed 003). The rows of lhs split into consecutive groups of
// group_sizes (s32[G]); a device owning groups [group_offset, group_offset + g) of them (an s32
// scalar tracer; none: 0) multiplies only those. Negative sizes, sizes summing past m, and a
// group_offset whose groups do not fit in G fail the run.
// gmm(lhs[m,k], rhs[g,k,n] or, with transpose_rhs, [g,n,k]) -> [m,n]: the rows of group
// group_offset + i times rhs[i]; other rows (other groups', past the sizes' sum) are zeros.
Tracer gmm(Tracer lhs, Tracer rhs, Tracer group_sizes, DType preferred_element_type = DType::kF32,
           Tracer group_offset = Tracer(), bool transpose_rhs = false, Loc loc = Loc::current());
// tgmm(lhs[k,m], rhs[m,n]) -> [num_actual_groups,k,n]: out[i] = lhs[:, rows of group
// group_offset + i] @ rhs[those rows, :], zeros for an empty group. num_actual_groups -1: G.
Tracer tgmm(Tracer lhs, Tracer rhs, Tracer group_sizes, DType preferred_element_type = DType::kF32,
            Tracer group_offset = Tracer(), int64_t num_actual_groups = -1,
            Loc loc = Loc::current());

}  // namespace lax

namespace jnp {

// jnp.broadcast_to: numpy-style broadcast of x to `shape` (trailing dims aligned).
Tracer broadcast_to(Tracer x, std::vector<int64_t> shape, Loc loc = Loc::current());
// jnp.matmul: numpy's matmul. Matrices multiply; a vector operand acts as a matrix of one row
// (lhs) or column (rhs), that dimension dropped from the result; two vectors give their dot
// product; stacks of matrices (rank > 2) multiply pairwise, their leading dimensions broadcast
// against each other.
Tracer matmul(Tracer lhs, Tracer rhs, Loc loc = Loc::current());

}  // namespace jnp

// A scalar operand of the Tracer operators, weakly typed as in JAX: a C++ integer is a weak int
// (x + 1 keeps x's dtype; pred + 1 is s32), a floating-point value a weak float (an integer or
// pred x times 0.5 is f32). Integers beyond 2^53 in magnitude are refused when used (constants
// hold f64 values).
struct Scalar {
  Scalar(double v) : value(v), kind(jnp::WeakKind::kFloat) {}
  template <typename I>
    requires(std::is_integral_v<I> && !std::is_same_v<I, bool>)
  Scalar(I v)
      : value(static_cast<double>(v)),
        kind(jnp::WeakKind::kInt),
        exact(std::cmp_less_equal(v, int64_t{1} << 53) &&
              std::cmp_greater_equal(v, -(int64_t{1} << 53))) {}

  double value;
  jnp::WeakKind kind;
  bool exact = true;
};

// jax.numpy's operators: operands of different dtypes are first converted to
// jnp::promote_types of theirs (a Scalar to promote_weak), then broadcast. `/` on integers
// truncates as in C++ and lax.div (Python's `/` would divide in floats: convert first).
Tracer operator+(Tracer a, Tracer b);
Tracer operator-(Tracer a, Tracer b);
Tracer operator*(Tracer a, Tracer b);
Tracer operator/(Tracer a, Tracer b);
Tracer operator%(Tracer a, Tracer b);
Tracer operator-(Tracer x);
Tracer operator<(Tracer a, Tracer b);
Tracer operator<=(Tracer a, Tracer b);
Tracer operator>(Tracer a, Tracer b);
Tracer operator>=(Tracer a, Tracer b);
Tracer operator+(Tracer a, Scalar b);
Tracer operator-(Tracer a, Scalar b);
Tracer operator*(Tracer a, Scalar b);
Tracer operator/(Tracer a, Scalar b);
Tracer operator%(Tracer a, Scalar b);
Tracer operator<(Tracer a, Scalar b);
Tracer operator<=(Tracer a, Scalar b);
Tracer operator>(Tracer a, Scalar b);
Tracer operator>=(Tracer a, Scalar b);
Tracer operator+(Scalar a, Tracer b);
Tracer operator-(Scalar a, Tracer b);
Tracer operator*(Scalar a, Tracer b);
Tracer operator/(Scalar a, Tracer b);

}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_OPS_H_
