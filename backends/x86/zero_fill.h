// Zeroing of large output blocks (empty groups of tgmm, rows outside a device's groups of gmm, a
// GEMM of depth 0) with non-temporal stores: such a block is written once and is not read soon,
// and streaming stores write it without first reading every line (on a Zen 3 EPYC, 4 MiB blocks:
// 32-35 GB/s against 9-11 GB/s for memset). Blocks below kStreamingZeroBytes use memset, whose
// lines stay in cache for a reader that follows.
#ifndef SHARDJIT_BACKENDS_X86_ZERO_FILL_H_
#define SHARDJIT_BACKENDS_X86_ZERO_FILL_H_

#include <cstdint>

namespace shardjit::backends::x86 {

// Fills of this many bytes or more (all rows together) use non-temporal stores: about an L2.
inline constexpr int64_t kStreamingZeroBytes = int64_t{1} << 20;

// Zeroes `rows` rows of `row_bytes` bytes each, row i at dst + i * stride (stride >= row_bytes,
// or any when rows <= 1). Rows may start at any address. The stores are complete (fenced) on
// return, so that a thread that learns of them through a lock or an atomic sees zeros.
void ZeroRows(void* dst, int64_t rows, int64_t row_bytes, int64_t stride);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_ZERO_FILL_H_
