// The variants of the seed notebook's distributed bf16 matmul out = x @ w, with x sharded
// P('x','y') and w sharded P('x', None) over a 2-D mesh, as shardjit programs.
#ifndef SHARDJIT_EXAMPLES_SEED_VARIANTS_H_
#define SHARDJIT_EXAMPLES_SEED_VARIANTS_H_

#include <set>
#include <string>
#include <vector>

#include "frontend/shardjit.h"

namespace shardjit::examples {

struct SeedVariant {
  std::string name;
  std::string description;
  Jitted<Array> program;
};

// (a) jit of a plain matmul on the sharded inputs (global view);
// (b) shard_map with two all_gathers;
// (c) all_gather of w + dynamic_slice by axis_index('y') + psum over y;
// (d) = (c) with preferred_element_type=f32;
// (e) a ring all-gather of w from ppermute in a fori_loop, then the local matmul and psum;
// (f) the notebook's to-do by hand: w's block fetched with ppermute_start, and the sum over y as
//     a reduce-scatter ring interleaved with the matmul (futures carried through fori_loop),
//     the result's columns split over y (P('x','y'));
// (g) the notebook's Pallas variant: (c) with the local product a user-written blocked matmul
//     kernel (examples/kernels/blocked_matmul.h), f32 out;
// (h) the notebook's ring all-gather of w by remote DMA (examples/kernels/ring_all_gather.h),
//     then (d).
// `k` is the contracting size (the block of w a device multiplies depends on it).
// `disabled_passes` are skipped when lowering (e.g. {"collective-fusion"} for the programs as
// written).
std::vector<SeedVariant> SeedVariants(const Mesh& mesh, int64_t k,
                                      Backend backend = DefaultBackend(),
                                      const std::set<std::string>& disabled_passes = {});

}  // namespace shardjit::examples

#endif  // SHARDJIT_EXAMPLES_SEED_VARIANTS_H_
