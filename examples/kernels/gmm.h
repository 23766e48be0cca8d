// Seed 003's megablox gmm and tgmm as user kernels. gmm: out[m,n] = the rows of each group of
// lhs[m,k] times that group's rhs[g] (rhs[G,k,n]), rows past the groups' sum zero. The group
// metadata (each group's row offsets, which group and which m tile every grid step works on, the
// number of active tiles) is computed from group_sizes by traced ops and handed to the kernel as
// scalar prefetch; the grid's middle axis is sized at run time by the number of active tiles. A
// tile shared by two groups is visited once per group, consecutively, each visit storing its
// group's rows (masked partial tiles). tgmm: out[g] = lhs[:, rows of group g] @ rhs[those rows,
// :], the grid's m-tile axis innermost so that consecutive steps of one group accumulate into one
// output block, stored when the group changes; an empty group's block is zeros.
#ifndef SHARDJIT_EXAMPLES_KERNELS_GMM_H_
#define SHARDJIT_EXAMPLES_KERNELS_GMM_H_

#include <cstdint>

#include "frontend/shardjit.h"

namespace shardjit::examples {

struct GmmTiles {
  int64_t tm = 128, tk = 128, tn = 128;
};

// megablox's make_group_metadata (unsharded groups); `visit_empty_groups` gives each empty group
// one step (tgmm zeroes its output there).
struct GroupMetadata {
  Tracer group_offsets;  // s32[G + 1]: where each group's rows start; the last entry their sum
  Tracer group_ids;      // s32[tiles_m + G - 1]: the group of each grid step
  Tracer m_tile_ids;     // s32[tiles_m + G - 1]: the m tile of each grid step
  Tracer num_tiles;      // s32[]: the grid steps along m
};
GroupMetadata MakeGroupMetadata(Tracer group_sizes, int64_t m, int64_t tm,
                                bool visit_empty_groups = false);

// gmm(lhs, rhs, group_sizes) with f32 accumulation, the result in `preferred` (f32 or bf16).
// m must be a multiple of tiles.tm; k and n may leave partial tiles.
Tracer Gmm(Tracer lhs, Tracer rhs, Tracer group_sizes, GmmTiles tiles = {},
           DType preferred = DType::kF32);

// tgmm(lhs[k,m], rhs[m,n], group_sizes) -> [G,k,n], f32 accumulation. m must be a multiple of
// tiles.tm.
Tracer Tgmm(Tracer lhs, Tracer rhs, Tracer group_sizes, GmmTiles tiles = {},
            DType preferred = DType::kF32);

}  // namespace shardjit::examples

#endif  // SHARDJIT_EXAMPLES_KERNELS_GMM_H_
