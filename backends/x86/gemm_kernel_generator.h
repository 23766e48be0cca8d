// The loop skeleton shared by the GEMM micro-kernel generators: the loop over the N panels, each
// panel's body (zero the accumulators, k loop, store C) and the unrolled k loop. Subclasses emit
// the ISA-specific parts: zeroing, one k step, prefetch and the store of C.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_KERNEL_GENERATOR_H_
#define SHARDJIT_BACKENDS_X86_GEMM_KERNEL_GENERATOR_H_

#include "backends/x86/gemm_kernel.h"
#include "backends/x86/jit_generator.h"

namespace shardjit::backends::x86 {

class GemmKernelGenerator : public JitGenerator {
 protected:
  static constexpr int kUnroll = 4;  // k steps per main-loop iteration

  GemmKernelGenerator(const KernelKey& key, int lanes)
      : JitGenerator(key.Name()), key_(key), vecs_(key.nr / lanes) {}

  // Before the panel loop (e.g. loading tail masks).
  virtual void EmitSetup() {}
  virtual void EmitZero(int vecs) = 0;
  // One k step over `vecs` vectors; `step` indexes the step within an unrolled iteration.
  virtual void EmitStep(int vecs, int step) = 0;
  virtual void EmitPrefetchC(int vecs) = 0;
  // Adds C when accumulating, stores; `tail`: tail_vecs vectors, masked.
  virtual void EmitStoreC(int vecs, bool tail) = 0;

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

 private:
  void GenerateBody() final;
  // One panel: zero, k loop, store. `tail`: the last, partial panel.
  void EmitBody(bool tail);
  void EmitKLoop(int vecs);
};

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_GEMM_KERNEL_GENERATOR_H_
