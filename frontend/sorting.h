// Ordering and scans along one dimension, as jax.lax has them: sort, sort_key_val, top_k, argmax,
// argmin, cumsum, cumprod, cummax, cummin; jnp::argsort on them. A negative dimension or axis
// counts from the end (-1: the last).
//
// Orders: sort puts -0 and +0 together and every NaN after +inf; top_k uses the total order
// -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN and puts the lower index first among equals;
// argmax and argmin return the first NaN's index if there is one, else the first extreme's.
#ifndef SHARDJIT_FRONTEND_SORTING_H_
#define SHARDJIT_FRONTEND_SORTING_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "frontend/ops.h"

namespace shardjit {
namespace lax {

// Sorts `operands` (one shape) together along `dimension`, lexicographically by the first
// `num_keys` of them; ascending. Stable when `is_stable` (shardjit's sort always is).
std::vector<Tracer> sort(std::vector<Tracer> operands, int64_t dimension = -1,
                         bool is_stable = true, int64_t num_keys = 1, Loc loc = Loc::current());
Tracer sort(Tracer operand, int64_t dimension = -1, bool is_stable = true,
            Loc loc = Loc::current());
// Sorts `keys` along `dimension` and permutes `values` alike: {sorted keys, values}.
std::pair<Tracer, Tracer> sort_key_val(Tracer keys, Tracer values, int64_t dimension = -1,
                                       bool is_stable = true, Loc loc = Loc::current());

// The k largest elements along `axis` in descending order, and their s32 indices:
// auto [values, indices] = lax::top_k(x, 2);
std::pair<Tracer, Tracer> top_k(Tracer operand, int64_t k, int64_t axis = -1,
                                Loc loc = Loc::current());

// The index of the largest (smallest) element along `axis`, which is removed from the shape.
Tracer argmax(Tracer operand, int64_t axis, DType index_dtype = DType::kS32,
              Loc loc = Loc::current());
Tracer argmin(Tracer operand, int64_t axis, DType index_dtype = DType::kS32,
              Loc loc = Loc::current());

// Inclusive scans along `axis` (from its end with `reverse`); numeric operands. Floats
// accumulate in f32 (bf16 rounds each result), s32 wraps.
Tracer cumsum(Tracer operand, int64_t axis = 0, bool reverse = false, Loc loc = Loc::current());
Tracer cumprod(Tracer operand, int64_t axis = 0, bool reverse = false, Loc loc = Loc::current());
Tracer cummax(Tracer operand, int64_t axis = 0, bool reverse = false, Loc loc = Loc::current());
Tracer cummin(Tracer operand, int64_t axis = 0, bool reverse = false, Loc loc = Loc::current());

}  // namespace lax

namespace jnp {

// The s32 indices that sort `x` along `axis` (jnp.argsort): a stable sort of (x, iota); with
// `descending`, largest first and equal elements still in their original order.
Tracer argsort(Tracer x, int64_t axis = -1, bool stable = true, bool descending = false,
               Loc loc = Loc::current());

}  // namespace jnp
}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_SORTING_H_
