// Seed 001 written with the public API: the bidirectional all-gather collective matmul. The
// row blocks of x travel around the ring of `axis` both ways (ppermute_start / ppermute_done,
// futures carried through a fori_loop so that the next blocks are in flight while the ones that
// arrived are multiplied); each device multiplies every block by its own columns of w, and the
// gathered x is never formed.
//   x[M, K] sharded P(axis, None), w[K, N] sharded P(None, axis) -> out[M, N] P(None, axis), f32.
// (collective-fusion builds the same ring from all_gather + dot_general.)
#ifndef SHARDJIT_EXAMPLES_COLLECTIVE_MATMUL_H_
#define SHARDJIT_EXAMPLES_COLLECTIVE_MATMUL_H_

#include <string>

#include "frontend/shardjit.h"

namespace shardjit::examples {

Jitted<Array> BidirectionalCollectiveMatmul(const Mesh& mesh, const std::string& axis,
                                            JitOptions options = {});

}  // namespace shardjit::examples

#endif  // SHARDJIT_EXAMPLES_COLLECTIVE_MATMUL_H_
