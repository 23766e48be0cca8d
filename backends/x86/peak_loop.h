// The compute peak of one instruction on this core: a generated loop of independent
// accumulating instructions (enough accumulators to cover the latency), timed. It tells the
// GEMM dispatch whether AVX512_BF16's vdpbf16ps is really faster than f32 FMAs on bf16 data
// widened in packing (twice the flops per instruction, but on some CPUs half the throughput),
// and //bench:gemm reports the peaks beside the GEMMs.
#ifndef SHARDJIT_BACKENDS_X86_PEAK_LOOP_H_
#define SHARDJIT_BACKENDS_X86_PEAK_LOOP_H_

#include <cstdint>

#include "xbyak/xbyak.h"

namespace shardjit::backends::x86 {

// `iterations` x (`accumulators` independent instructions), then ret: void fn(int64_t iterations).
// Sources are zmm30/zmm31 (ymm14/ymm15); AMX: accumulators tmm0-3 (at most 4) from tmm4 x tmm6,
// tiles configured and released by the loop. Call only where the CPU has the instruction.
class PeakLoop : public Xbyak::CodeGenerator {
 public:
  enum class Kind { kDpbf16Zmm, kFmaZmm, kFmaYmm, kAmxTdpbf16, kVpdpbusdZmm };

  PeakLoop(Kind kind, int accumulators);
  void Run(int64_t iterations) const { getCode<void (*)(int64_t)>()(iterations); }

  // Flops of one instruction: vdpbf16ps zmm 16 lanes x 2 products x 2; vfmadd231ps zmm 16 x 2,
  // ymm 8 x 2; tdpbf16ps 16 x 16 x 32 x 2; vpdpbusd zmm 16 x 4 x 2 (integer operations).
  static double FlopsPerInstruction(Kind kind);
};

// Whether a bf16 GEMM is faster on vdpbf16ps than on f32 FMAs (zmm): both peaks measured once,
// on first use (under a millisecond). False where the CPU lacks AVX512_BF16.
bool Bf16DotProductBeatsFma();

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_PEAK_LOOP_H_
