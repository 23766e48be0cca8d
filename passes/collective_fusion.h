// collective-fusion: fuses collectives with the dot_generals around them in SPMD code
// (per-device modules and shard_map bodies), so that compute overlaps communication and gathered
// operands are never materialised:
//   - all_gather (tiled, no groups) of an operand of a dot_general, its only use, along a free
//     dim -> a ring: each step starts passing the shard held now to the next device
//     (ppermute_start), adds its product into its rows of the result (dot_accumulate) and awaits
//     the next shard (ppermute_done); bidirectional (shards travel both ways, half the steps) for
//     groups of more than 2 (seed 001's algorithm);
//   - the same along a contracting dim: the partial products of the arriving shards with the
//     matching block of the other operand are accumulated (in f32 for a bf16 result, rounded once);
//   - dynamic_slice(all_gather(w, A), axis_index(B) * shard) of one whole shard, w invariant across
//     B and |A| = |B| -> the one shard needed, fetched directly from a device that holds it
//     (ppermute over (A, B) transposing the device grid), started where the gather was and awaited
//     where the slice was: no gathered buffer, no copy (the seed's variants (c) and (d));
//   - dot_general whose only use is a tiled psum_scatter along a free dim -> a reduce-scatter
//     ring: each step passes the running partial sum of one block on and adds this device's
//     product for the next block into the block received (accumulated in f32, rounded once);
//   - a bf16 dot_general whose only use is a psum (or a psum_scatter not made a ring): the
//     product and the sum in f32, rounded once (excess precision, as XLA does;
//     `f32_partial_sums = false` keeps per-op rounding).
// The rings are chosen by the machine model (passes/machine_model.h): a ring pays a collective
// per step and saves the copies of the gathered (or summed) buffer; a program the model does not
// favour is left unchanged. Collectives with axis_index_groups are left alone.
#ifndef SHARDJIT_PASSES_COLLECTIVE_FUSION_H_
#define SHARDJIT_PASSES_COLLECTIVE_FUSION_H_

#include <cstdint>
#include <utility>

#include "passes/machine_model.h"
#include "passes/options.h"
#include "passes/pass.h"

namespace shardjit::passes {


class CollectiveFusion final : public Pass {
 public:
  explicit CollectiveFusion(CollectiveFusionOptions options = {}, MachineModel machine = {})
      : options_(options), machine_(std::move(machine)) {}
  std::string name() const override { return "collective-fusion"; }
  absl::StatusOr<bool> Run(ir::Module& module) override;

 private:
  CollectiveFusionOptions options_;
  MachineModel machine_;  // what the rings are priced by
};

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_COLLECTIVE_FUSION_H_
