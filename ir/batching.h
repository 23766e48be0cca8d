// Batching of IR regions (jax.vmap) with the primitives' batching rules (ir/ad_rule.h): each op
// is re-emitted on operands of which some carry a batch dimension, and its rule says where the
// batch dimension of each result is. Emitted into a FunctionBuilder, as ir/autodiff.h does.
#ifndef SHARDJIT_IR_BATCHING_H_
#define SHARDJIT_IR_BATCHING_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ad_rule.h"
#include "ir/autodiff.h"
#include "ir/builder.h"
#include "ir/ir.pb.h"

namespace shardjit::ir {

// A value a region reads from an enclosing one (`region_id`): its builder id and batch dim.
struct BatchedCapture {
  int64_t region_id = 0;
  int64_t value = 0;
  int64_t batch_dim = kNotBatched;
};

// Emits `region` on `args` (builder ids), arg i batched along `batch_dims[i]` (kNotBatched: the
// same for every batch element) with batch size `size`: its results, each batched along the
// dimension given (kNotBatched for results that do not depend on a batched value). Loops, cond,
// custom_jvp_call, custom_vjp_call, checkpoint, shard_map and pallas_call are batched through
// their regions (a cond on a batched index becomes a select of all its branches' results, as in
// JAX; a pallas_call gets a leading grid axis over the batch, as in Pallas).
// `axis_name` (optional) names the batch axis for collectives inside (jax.vmap's axis_name):
// the builder must know it (FunctionBuilder::PushNamedAxis) while `region` was traced.
absl::StatusOr<BatchedValues> EmitBatched(FunctionBuilder& b, const Region& region,
                                          const std::vector<int64_t>& args,
                                          const std::vector<int64_t>& batch_dims, int64_t size,
                                          const std::vector<BatchedCapture>& captures = {},
                                          std::string_view axis_name = {});

// Whether `op` is a collective over `axis_name` (among its axes); false for an empty name.
bool IsCollectiveOver(const Op& op, std::string_view axis_name);

// `x` with its batch dimension `batch_dim` moved to `to` (a transpose; x itself when it is
// there already). An unbatched x is broadcast along a new dimension `to` of `size`.
absl::StatusOr<int64_t> MoveBatchDim(AdEmitter& e, int64_t x, int64_t batch_dim, int64_t to,
                                     int64_t size);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_BATCHING_H_
