// Packing of GEMM operands into the panels the micro-kernels read (gemm_kernel.h): A into
// panels of mr rows, B into panels of nr columns, k-step major (A in AMX tiles: row-major within
// blocks of 16 steps), zero-padded in rows, columns and (for bf16 pairs) an odd last k, and for
// AMX tiles up to whole blocks. bf16 sources packed as kF32 are widened; int8 sources pack as
// kS8Quads only (A's values offset by 128 into u8, gemm_kernel.h).
#ifndef SHARDJIT_BACKENDS_X86_GEMM_PACK_H_
#define SHARDJIT_BACKENDS_X86_GEMM_PACK_H_

#include <cstdint>

#include "backends/x86/gemm.h"
#include "backends/x86/gemm_kernel.h"

namespace shardjit::backends::x86 {

// A strided f32, bf16 or int8 matrix (the input type of `type`): element (r, c) is
// data[r * row_stride + c * col_stride].
struct MatrixView {
  const void* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
  GemmType type = GemmType::kF32F32F32;
};

// k steps of `k` values in `layout`: k, ceil(k / 2) for bf16 pairs, rounded up to whole blocks
// of 16 for AMX tiles, ceil(k / 4) for int8 quads.
inline int64_t KSteps(PanelLayout layout, int64_t k) {
  switch (layout) {
    case PanelLayout::kF32:
      return k;
    case PanelLayout::kBf16Pairs:
      return (k + 1) / 2;
    case PanelLayout::kAmxTiles:
      return ((k + 1) / 2 + 15) / 16 * 16;
    case PanelLayout::kS8Quads:
      return (k + 3) / 4;
  }
  return k;
}

// Packs rows [row0, row0 + rows) and k [k0, k0 + kc) of `a` into ceil(rows / mr) panels of
// KSteps(kc) * mr * 4 bytes each, starting at `dst`.
void PackA(const MatrixView& a, int64_t row0, int64_t rows, int64_t k0, int64_t kc,
           PanelLayout layout, int mr, void* dst);

// Packs k [k0, k0 + kc) and columns [col0, col0 + cols) of `b` into ceil(cols / nr) panels of
// KSteps(kc) * nr * 4 bytes each, starting at `dst`.
void PackB(const MatrixView& b, int64_t k0, int64_t kc, int64_t col0, int64_t cols,
           PanelLayout layout, int nr, void* dst);

// Packs k steps [step0, step0 + steps) of the B block of `block_k` k values that starts at k0,
// in `layout` (kF32: a step is a row of B; kBf16Pairs: two rows, the second zero past the
// block), columns [col0, col0 + cols), into its panels of KSteps(layout, block_k) steps (steps
// step0.. of each panel; the panels start at `dst`): part of what
// PackB(b, k0, block_k, col0, cols, layout, nr, dst) writes, so that a block can be packed in
// pieces. `b` must be contiguous along n (and bf16 for kBf16Pairs).
void PackBSteps(const MatrixView& b, PanelLayout layout, int64_t k0, int64_t block_k,
                int64_t step0, int64_t steps, int64_t col0, int64_t cols, int nr, void* dst);

// The int8 kernels' column offsets (MicroKernelArgs::col_offset) of columns [col0, col0 + cols)
// of int8 `b` over k values [0, k): out[j] = -128 * sum of column col0 + j, wrapping modulo
// 2^32; zero for cols <= j < width.
void Int8ColumnOffsets(const MatrixView& b, int64_t k, int64_t col0, int64_t cols, int64_t width,
                       int32_t* out);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_GEMM_PACK_H_
