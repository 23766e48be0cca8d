// The f64 GEMM (GemmType::kF64F64F64) from the AVX2 level up: A and B packed into panels of a
// tile's rows and columns, and an FMA micro-kernel holding the tile of C in registers: 6x8 in 12
// ymm registers with AVX2, 8x24 in 24 zmm registers with AVX-512. Sums in f64, in k order within
// a block.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_F64_H_
#define SHARDJIT_BACKENDS_X86_GEMM_F64_H_

#include "absl/status/status.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/gemm.h"

namespace shardjit::backends::x86 {

// Rows and columns of C one micro-kernel call computes at `isa` (kAvx2 or kAvx512): how Gemm
// splits an f64 product over threads.
struct F64Tile {
  int rows, cols;
};
F64Tile F64TileAt(IsaLevel isa);

struct GemmScratch;

// Runs `args` (kF64F64F64, validated, row strides and ldc resolved, non-empty) on this thread
// with the kernels of `isa` (kAvx2, or kAvx512 on a CPU with AVX-512F), packing into
// `scratch`'s buffers; stops between blocks with the error of args.parallel.stop once it is
// requested.
absl::Status GemmF64(const GemmArgs& args, IsaLevel isa, GemmScratch* scratch);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_GEMM_F64_H_
