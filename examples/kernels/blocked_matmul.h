// Seed 000's blocked matmul as a user kernel: out = x @ y over a (m/bm, n/bn, k/bk) grid, the k
// axis accumulating into an f32 scratch block that is zeroed at the first k step and written out
// (converted to `out_dtype`) at the last. Blocks may overhang m and n (Pallas pads and clips
// them); a k that bk does not divide is masked, since the padding of the last k block is NaN.
#ifndef SHARDJIT_EXAMPLES_KERNELS_BLOCKED_MATMUL_H_
#define SHARDJIT_EXAMPLES_KERNELS_BLOCKED_MATMUL_H_

#include <cstdint>

#include "frontend/shardjit.h"

namespace shardjit::examples {

struct MatmulBlocks {
  int64_t bm = 128, bk = 128, bn = 128;
};

// The pallas_call of x[m,k] @ y[k,n]; the i and j grid axes are parallel, k is arbitrary.
pl::PallasCall BlockedMatmul(int64_t m, int64_t k, int64_t n, MatmulBlocks blocks = {},
                             DType out_dtype = DType::kF32);

}  // namespace shardjit::examples

#endif  // SHARDJIT_EXAMPLES_KERNELS_BLOCKED_MATMUL_H_
