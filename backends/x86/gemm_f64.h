// The f64 GEMM (GemmType::kF64F64F64) at the AVX2 level and above: A and B packed into panels of
// 6 rows and 8 columns, k blocks of 256, and an FMA micro-kernel holding a 6x8 tile of C in 12
// ymm registers (AVX-512 CPUs run it too: there is no zmm f64 kernel). Sums in f64, in k order
// within a block.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_F64_H_
#define SHARDJIT_BACKENDS_X86_GEMM_F64_H_

#include "absl/status/status.h"
#include "backends/x86/gemm.h"

namespace shardjit::backends::x86 {

// Rows and columns of C one micro-kernel call computes (how Gemm splits an f64 product over
// threads).
inline constexpr int kF64TileRows = 6;
inline constexpr int kF64TileCols = 8;

struct GemmScratch;

// Runs `args` (kF64F64F64, validated, row strides and ldc resolved, non-empty) on this thread,
// on a CPU with AVX2 and FMA, packing into `scratch`'s buffers; stops between blocks with the
// error of args.parallel.stop once it is requested.
absl::Status GemmF64Avx2(const GemmArgs& args, GemmScratch* scratch);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_GEMM_F64_H_
