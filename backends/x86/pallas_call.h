// pallas_call compiled for x86. The kernel and its index maps are compiled once per op into a
// program of steps: scalar code (grid indices, index maps, pl.when conditions, window starts,
// loop indices and scalar carries) on integer slots; blocks that lie inside their arrays as
// strided views of the operands and results (padded copies only for blocks that overhang; fresh
// outputs padded lazily, backends/x86/pallas_padding.h); tile dot_generals as GEMM calls reading
// the views, accumulating straight into a ref when the kernel adds a dot to what it loaded from
// that window and stores the sum back, deferred so that steps combine
// (backends/x86/pallas_deferred.h: GEMMs continuing along k, or writing neighbouring output
// tiles, run as one product; a store of an accumulator, or of some of its rows, makes its GEMM
// write the output); masks built from iotas and scalars read symbolically
// (backends/x86/pallas_masks.h), so a dot of masked blocks runs over the mask's depth and a
// masked store copies the mask's box; other tile ops through the backend's kernels. The grid's leading parallel axes are split over the
// program's threads; the rest run in order on each thread; cond, fori_loop and while_loop run
// their regions' programs. Kernels outside this form (a batched dot, a dot of other dtypes, a
// scan, ...) give Unimplemented and the evaluator interprets them (backends/reference/pallas.h),
// with the same results and errors.
#ifndef SHARDJIT_BACKENDS_X86_PALLAS_CALL_H_
#define SHARDJIT_BACKENDS_X86_PALLAS_CALL_H_

#include "backends/reference/evaluator.h"

namespace shardjit::backends::x86 {

// The pallas_call kernel of an executable: compiles each op it meets once (kept for the
// executable's lifetime); tile ops other than dots run on `kernels` (the backend's overrides;
// the reference kernels for the rest).
reference::Kernel MakePallasCallKernel(reference::KernelOverrides kernels);

// How many pallas_calls ran compiled, and how many were left to the interpreter, in this process;
// how many selects the kernels compiled so far read through their masks alone; how many rows
// of accumulating GEMMs the kernels skipped (overwritten or dead before anything read them), and
// how many products their deferred GEMMs ran as (backends/x86/pallas_deferred.h), and how many
// blocks of fresh outputs got Pallas' padding (backends/x86/pallas_padding.h: the blocks a store
// overwrites whole before anything reads them get none).
struct PallasCallStats {
  int64_t compiled = 0;
  int64_t interpreted = 0;
  int64_t masked_selects = 0;
  int64_t gemm_rows_skipped = 0;
  int64_t deferred_gemms_run = 0;
  int64_t padded_output_blocks = 0;
};
PallasCallStats GetPallasCallStats();

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_PALLAS_CALL_H_
