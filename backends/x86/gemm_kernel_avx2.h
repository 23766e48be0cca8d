// AVX2 GEMM micro-kernel generator for kF32 panels: ymm accumulators, vbroadcastss of A,
// vfmadd231ps. Tail columns use vmaskmovps with the per-lane masks of MicroKernelArgs.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AVX2_H_
#define SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AVX2_H_

#include "backends/x86/gemm_kernel.h"
#include "backends/x86/gemm_kernel_generator.h"

namespace shardjit::backends::x86 {

class GemmKernelAvx2 final : public GemmKernelGenerator {
 public:
  // Whether `key` fits the register file: kF32, nr a multiple of 8, and
  // rows * vectors + vectors + 2 <= 16.
  static bool Supports(const KernelKey& key);

  explicit GemmKernelAvx2(const KernelKey& key);

 private:
  static constexpr int kLanes = 8;
  void EmitZero(int vecs) override;
  void EmitStep(int vecs, int step) override;
  void EmitPrefetchC(int vecs) override;
  void EmitBeforeStoreC(int vecs, bool tail) override;
  void EmitAddC(int row, int vec, const Xbyak::Address& c, bool tail) override;
  void EmitStoreCVector(int row, int vec, const Xbyak::Address& c, bool tail) override;
  Xbyak::Xmm CopyRegister(int i) const override { return B(i); }

  Xbyak::Ymm Acc(int row, int vec) const { return Xbyak::Ymm(row * vecs_ + vec); }
  Xbyak::Ymm B(int vec) const { return Xbyak::Ymm(13 - vec); }
  // Two broadcast registers, alternated between rows.
  Xbyak::Ymm ABroadcast(int row) const { return Xbyak::Ymm(14 + row % 2); }
  // After the k loop the B registers hold the tail masks and ABroadcast(0) the loaded C.
  Xbyak::Ymm TailMask(int vec) const { return B(vec); }
  Xbyak::Ymm CValue() const { return ABroadcast(0); }
};

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AVX2_H_
