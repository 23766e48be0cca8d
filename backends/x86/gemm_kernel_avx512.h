// AVX-512 GEMM micro-kernel generator: zmm accumulators, B vectors loaded from the packed panel,
// A broadcast from memory ({1to16}). kF32 panels use vfmadd231ps; kBf16Pairs panels use
// vdpbf16ps (AVX512_BF16), each step consuming two k values. Tail columns use opmasks k1..k7.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AVX512_H_
#define SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AVX512_H_

#include "backends/x86/gemm_kernel.h"
#include "backends/x86/jit_generator.h"

namespace shardjit::backends::x86 {

class GemmKernelAvx512 : public JitGenerator {
 public:
  // Whether `key` fits the register file: nr a multiple of 16 (at most 7 vectors) and
  // rows * vectors + vectors <= 32.
  static bool Supports(const KernelKey& key);

  explicit GemmKernelAvx512(const KernelKey& key);

 private:
  static constexpr int kLanes = 16;
  static constexpr int kUnroll = 4;  // k steps per main-loop iteration

  void GenerateBody() override;
  // One panel: zero, k loop, optional add of C, store. `tail`: tail_vecs vectors, masked.
  void EmitBody(bool tail);
  void EmitKLoop(int vecs);
  void EmitStep(int vecs, int step);
  void EmitPrefetchC(int vecs);
  void EmitStoreC(int vecs, bool tail);

  Xbyak::Zmm Acc(int row, int vec) const { return Xbyak::Zmm(row * vecs_ + vec); }
  Xbyak::Zmm B(int vec) const { return Xbyak::Zmm(31 - vec); }
  Xbyak::Opmask TailMask(int vec) const { return Xbyak::Opmask(1 + vec); }

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

#endif  // SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AVX512_H_
