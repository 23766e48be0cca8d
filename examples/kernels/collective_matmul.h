// Seed 001 as a user kernel: the bidirectional all-gather collective matmul of Mosaic's TPU
// kernel, with its semaphores and double buffering. x is sharded along the contraction dimension
// over the ring of mesh axis `axis` (n devices, n even); every device computes
// out[m, cols] = all_gather(x, axis, 1, tiled) @ w without forming the gathered x:
//   - step 0 meets both neighbours on the barrier semaphore, grants each neighbour buffering-1
//     slots (capacity semaphores), puts the device's own block in scratch[0][LEFT] and sends it
//     to the right neighbour's scratch[0][RIGHT];
//   - step s (1..n/2) multiplies the two blocks of version v = (s-1) % 2 by their rows of w, while
//     (except at the last step) the LEFT block travels on to the left neighbour and the RIGHT one
//     to the right neighbour, each into the other version once that neighbour has freed it;
//   - the last step takes back the capacity the neighbours returned, so every semaphore ends at 0.
//   shard x[m, k/n] (P(None, axis)), w[k, cols] (replicated) -> out[m, cols] f32 (replicated).
#ifndef SHARDJIT_EXAMPLES_KERNELS_COLLECTIVE_MATMUL_H_
#define SHARDJIT_EXAMPLES_KERNELS_COLLECTIVE_MATMUL_H_

#include <string>

#include "frontend/shardjit.h"

namespace shardjit::examples {

// The kernel's pallas_call for a shard x[m, k_shard] and w[n * k_shard, cols] on a ring of `n`
// devices along `axis` (n even).
pl::PallasCall CollectiveMatmulKernel(const ShapedType& x_shard, const ShapedType& w,
                                      const std::string& axis, int64_t n);

// jit(shard_map(CollectiveMatmulKernel)) over `mesh`: x P(None, axis), w P() -> out P(); an
// error for a ring of odd size.
absl::StatusOr<Jitted<Array>> CollectiveMatmulKernelProgram(const Mesh& mesh,
                                                            const std::string& axis,
                                                            JitOptions options = {});

}  // namespace shardjit::examples

#endif  // SHARDJIT_EXAMPLES_KERNELS_COLLECTIVE_MATMUL_H_
