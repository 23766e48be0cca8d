// Indexing with arrays of indices, as jax.lax has it: gather and the scatters (XLA's dimension
// numbers; the index vector is the last dimension of the indices, which are s32), and the
// jax.numpy helpers built on them: jnp::take (embedding lookups), jnp::take_along_axis.
#ifndef SHARDJIT_FRONTEND_INDEXING_H_
#define SHARDJIT_FRONTEND_INDEXING_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "frontend/ops.h"

namespace shardjit {
namespace lax {

// jax.lax.GatherScatterMode: what an index whose slice (window) does not lie inside the operand
// does. kClip clamps it so that it does; kFillOrDrop (JAX's default) gives fill_value for a
// gather and drops the update of a scatter; kPromiseInBounds promises it cannot happen (shardjit
// then clamps a gather and drops a scatter's update, as XLA does).
enum class GatherScatterMode { kClip = 0, kFillOrDrop = 1, kPromiseInBounds = 2 };

// jax.lax.GatherDimensionNumbers.
struct GatherDimensionNumbers {
  std::vector<int64_t> offset_dims;
  std::vector<int64_t> collapsed_slice_dims;
  std::vector<int64_t> start_index_map;
  std::vector<int64_t> operand_batching_dims = {};
  std::vector<int64_t> start_indices_batching_dims = {};
};

// jax.lax.ScatterDimensionNumbers.
struct ScatterDimensionNumbers {
  std::vector<int64_t> update_window_dims;
  std::vector<int64_t> inserted_window_dims;
  std::vector<int64_t> scatter_dims_to_operand_dims;
  std::vector<int64_t> operand_batching_dims = {};
  std::vector<int64_t> scatter_indices_batching_dims = {};
};

// jax.lax.gather. fill_value (kFillOrDrop) defaults, as in JAX, to NaN for floats, the smallest
// signed and the largest unsigned integer (u64's, 2^64 - 1, as the op's fill_bits), and true for
// pred.
Tracer gather(Tracer operand, Tracer start_indices, GatherDimensionNumbers dimension_numbers,
              std::vector<int64_t> slice_sizes,
              GatherScatterMode mode = GatherScatterMode::kFillOrDrop,
              std::optional<double> fill_value = std::nullopt, Loc loc = Loc::current());

// jax.lax.scatter (the update replaces; with repeated indices the last one wins) and
// scatter_add / scatter_mul / scatter_min / scatter_max (combined in index order; floats in f32,
// rounded per update).
Tracer scatter(Tracer operand, Tracer scatter_indices, Tracer updates,
               ScatterDimensionNumbers dimension_numbers,
               GatherScatterMode mode = GatherScatterMode::kFillOrDrop, Loc loc = Loc::current());
Tracer scatter_add(Tracer operand, Tracer scatter_indices, Tracer updates,
                   ScatterDimensionNumbers dimension_numbers,
                   GatherScatterMode mode = GatherScatterMode::kFillOrDrop,
                   Loc loc = Loc::current());
Tracer scatter_mul(Tracer operand, Tracer scatter_indices, Tracer updates,
                   ScatterDimensionNumbers dimension_numbers,
                   GatherScatterMode mode = GatherScatterMode::kFillOrDrop,
                   Loc loc = Loc::current());
Tracer scatter_min(Tracer operand, Tracer scatter_indices, Tracer updates,
                   ScatterDimensionNumbers dimension_numbers,
                   GatherScatterMode mode = GatherScatterMode::kFillOrDrop,
                   Loc loc = Loc::current());
Tracer scatter_max(Tracer operand, Tracer scatter_indices, Tracer updates,
                   ScatterDimensionNumbers dimension_numbers,
                   GatherScatterMode mode = GatherScatterMode::kFillOrDrop,
                   Loc loc = Loc::current());

}  // namespace lax

namespace jnp {

// jnp.take(a, indices, axis): a.shape[:axis] + indices.shape + a.shape[axis+1:]; in the fill
// mode (the default) a negative index i means i + a.shape[axis], with kClip it is clamped to 0
// (indices are s32). take(table, ids, 0) is an embedding lookup.
Tracer take(Tracer a, Tracer indices, int64_t axis,
            lax::GatherScatterMode mode = lax::GatherScatterMode::kFillOrDrop,
            Loc loc = Loc::current());

// jnp.take_along_axis: indices of arr's rank (other dimensions of size 1 are broadcast) pick
// elements along `axis`; negative indices count from the end (unless kPromiseInBounds).
Tracer take_along_axis(Tracer arr, Tracer indices, int64_t axis,
                       lax::GatherScatterMode mode = lax::GatherScatterMode::kFillOrDrop,
                       Loc loc = Loc::current());

}  // namespace jnp
}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_INDEXING_H_
