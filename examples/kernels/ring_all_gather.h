// Seed 000's all-gather by remote DMA, as a user kernel on any mesh: the shards of x along mesh
// axis `axis` travel around its ring. Step 0 meets both neighbours on the barrier semaphore and
// copies the device's own shard into its slot of the output; each later step forwards the block
// that arrived last to the right neighbour's same slot, so after n - 1 steps every device holds
// every block. Devices name their neighbour by mesh coordinates ({axis: i}), the other axes
// keeping their own: the case JAX's Pallas cannot run on meshes of more than one axis.
//   shard x[h, w] (P(axis, None)) -> gathered [n * h, w], as all_gather(x, axis, 0, tiled).
#ifndef SHARDJIT_EXAMPLES_KERNELS_RING_ALL_GATHER_H_
#define SHARDJIT_EXAMPLES_KERNELS_RING_ALL_GATHER_H_

#include <string>

#include "frontend/shardjit.h"

namespace shardjit::examples {

// The kernel's pallas_call for shards of type `shard` on a ring of `n` devices along `axis`.
pl::PallasCall RingAllGather(const ShapedType& shard, const std::string& axis, int64_t n);

// jit(shard_map(RingAllGather)) over `mesh`: x sharded P(axis, None) -> replicated.
Jitted<Array> RingAllGatherProgram(const Mesh& mesh, const std::string& axis,
                                   JitOptions options = {});

}  // namespace shardjit::examples

#endif  // SHARDJIT_EXAMPLES_KERNELS_RING_ALL_GATHER_H_
