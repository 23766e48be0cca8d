// AVX2 GEMM micro-kernel generator for kF32 panels: ymm accumulators, vbroadcastss of A,
// vfmadd231ps. Tail columns use vmaskmovps with the per-lane masks of MicroKernelArgs.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AVX2_H_
#define SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AVX2_H_

#include "backends/x86/gemm_kernel.h"
#include "backends/x86/jit_generator.h"

namespace shardjit::backends::x86 {

class GemmKernelAvx2 : public JitGenerator {
 public:
  // Whether `key` fits the register file: kF32, nr a multiple of 8, and
  // rows * vectors + vectors + 2 <= 16.
  static bool Supports(const KernelKey& key);

  explicit GemmKernelAvx2(const KernelKey& key);

 private:
  static constexpr int kLanes = 8;
  static constexpr int kUnroll = 4;  // k steps per main-loop iteration

  void GenerateBody() override;
  // One panel: zero, k loop, optional add of C, store. `tail`: tail_vecs vectors, masked.
  void EmitBody(bool tail);
  void EmitKLoop(int vecs);
  void EmitStep(int vecs, int step);
  void EmitPrefetchC(int vecs);
  void EmitStoreC(int vecs, bool tail);

  Xbyak::Ymm Acc(int row, int vec) const { return Xbyak::Ymm(row * vecs_ + vec); }
  Xbyak::Ymm B(int vec) const { return Xbyak::Ymm(13 - vec); }
  // Two broadcast registers, alternated between rows.
  Xbyak::Ymm ABroadcast(int row) const { return Xbyak::Ymm(14 + row % 2); }
  // After the k loop the B registers hold the tail masks and ABroadcast(0) the loaded C.
  Xbyak::Ymm TailMask(int vec) const { return B(vec); }
  Xbyak::Ymm CValue() const { return ABroadcast(0); }

  const KernelKey key_;
  const int vecs_;  // vectors per full panel

  // Registers, named once.
  const Xbyak::Reg64 reg_args = abi_param1;
  const Xbyak::Reg64 reg_a = rsi;
  const Xbyak::Reg64 reg_b = rdx;
  const Xbyak::Reg64 reg_c = rcx;
  const Xbyak::Reg64 reg_ldc = r8;
  const Xbyak::Reg64 reg_k = r9;
  const Xbyak::Reg64 reg_panels = r10;
  const Xbyak::Reg64 reg_b_panel = r11;
  const Xbyak::Reg64 reg_c_row = rax;
};

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AVX2_H_
