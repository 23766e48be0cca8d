// collective-simplify: local rewrites of the collectives of SPMD code (per-device modules, and
// the shard_map bodies of global-view modules), then DCE:
//   - psum(x, A) whose only use is a dynamic_slice taking this device's block along one dimension
//     (start axis_index(A) * block, 0 elsewhere) -> psum_scatter(x, A, that dimension, tiled);
//   - a tiled all_gather(x, A) whose every use is a dynamic_slice taking back this device's own
//     block -> x;
//   - a tiled psum_scatter(x, A) of x = dynamic_update_slice(zeros, v, starts) where v is one
//     block of the scattered dimension placed at axis_index(B) * block (B apart from A, no
//     larger; other dimensions whole: the transpose of a dynamic_slice of an all_gather) ->
//     select(axis_index(A) == axis_index(B), psum(v, A), 0);
//   - psum(x, A) of a value invariant across A -> x * size(A); pmax/pmin (and pmean of floats)
//     of such a value -> x. A value is invariant across A when it is computed only from
//     constants, iotas, axis_index of other axes, parameters whose sharding names none of A, and
//     collectives that reduce or gather over A;
//   - combiners: independent psums over the same axes of one dtype are combined into one psum of
//     the concatenation of their flattened operands, sliced and reshaped back; independent tiled
//     all_gathers on dimension 0 over the same axes and groups, of one dtype, into one all_gather
//     of their operands flattened to [1, n] rows and concatenated, whose column ranges ([devices,
//     n] each) are reshaped back to the results.
// Collectives with axis_index_groups are left alone (except by the all_gather combiner).
#ifndef SHARDJIT_PASSES_COLLECTIVE_SIMPLIFY_H_
#define SHARDJIT_PASSES_COLLECTIVE_SIMPLIFY_H_

#include <cstdint>

#include "passes/pass.h"

namespace shardjit::passes {

struct CollectiveSimplifyOptions {
  // psum + dynamic_slice of this device's block -> psum_scatter.
  bool psum_to_psum_scatter = true;
  // all_gather whose uses only take back this device's own block -> its operand.
  bool remove_self_all_gather = true;
  // psum/pmax/pmin/pmean of values invariant across their axes -> local arithmetic.
  bool reduce_invariant = true;
  // tiled psum_scatter of zeros with one block placed at axis_index(B) -> psum of the block.
  bool scatter_of_one_block = true;
  // Combine independent psums (and, separately, tiled all_gathers on dimension 0) while their
  // operands total at most this many bytes; 0 disables.
  int64_t combine_max_bytes = int64_t{4} << 20;
};

class CollectiveSimplify final : public Pass {
 public:
  explicit CollectiveSimplify(CollectiveSimplifyOptions options = {}) : options_(options) {}
  std::string name() const override { return "collective-simplify"; }
  absl::StatusOr<bool> Run(ir::Module& module) override;

 private:
  CollectiveSimplifyOptions options_;
};

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_COLLECTIVE_SIMPLIFY_H_
