// AVX-512 GEMM micro-kernel generator: zmm accumulators, B vectors loaded from the packed panel,
// each A element broadcast once into a spare register (from memory, {1to16}, in tiles with no
// register to spare). kF32 panels use vfmadd231ps; kBf16Pairs panels use
// vdpbf16ps (AVX512_BF16), each step consuming two k values. Tail columns use opmasks k1..k7.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AVX512_H_
#define SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AVX512_H_

#include "backends/x86/gemm_kernel.h"
#include "backends/x86/gemm_kernel_generator.h"

namespace shardjit::backends::x86 {

class GemmKernelAvx512 final : public GemmKernelGenerator {
 public:
  // Whether `key` fits the register file: nr a multiple of 16 (at most 7 vectors) and
  // rows * vectors + vectors <= 32 (< 32 for kS8Quads, whose broadcast needs a register).
  static bool Supports(const KernelKey& key);

  explicit GemmKernelAvx512(const KernelKey& key);

 private:
  static constexpr int kLanes = 16;
  void EmitSetup() override;
  void EmitZero(int vecs) override;
  void EmitStep(int vecs, int step) override;
  void EmitPrefetchC(int vecs) override;
  void EmitBeforeStoreC(int vecs, bool tail) override;
  void EmitAddC(int row, int vec, const Xbyak::Address& c, bool tail) override;
  void EmitStoreCVector(int row, int vec, const Xbyak::Address& c, bool tail) override;
  Xbyak::Xmm CopyRegister(int i) const override { return B(i); }

  Xbyak::Zmm Acc(int row, int vec) const { return Xbyak::Zmm(row * vecs_ + vec); }
  Xbyak::Zmm B(int vec) const { return Xbyak::Zmm(31 - vec); }
  Xbyak::Opmask TailMask(int vec) const { return Xbyak::Opmask(1 + vec); }
};

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AVX512_H_
