// AMX GEMM micro-kernel generator: a 32x32 block of C in four 16x16 f32 tiles (tmm0-3), two A
// tiles of 16 rows x 32 bf16 (tmm4-5) and two B tiles of 16 k pairs x 16 columns (tmm6-7), four
// tdpbf16ps per 32 k values, from kAmxTiles panels (gemm_kernel.h). Full 32x32 blocks of C are
// loaded and stored as tiles in place; partial ones (the last rows, the masked tail panel) go
// through a block on the stack and masked AVX-512 moves. The tile configuration is loaded at
// entry and released at exit, so no tile state outlives a call.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AMX_H_
#define SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AMX_H_

#include "backends/x86/gemm_kernel.h"
#include "backends/x86/jit_generator.h"

namespace shardjit::backends::x86 {

class GemmKernelAmx final : public JitGenerator {
 public:
  // kAmxTiles keys of 32x32 tiles: rows 1..32, tail_vecs 0..2.
  static bool Supports(const KernelKey& key);

  explicit GemmKernelAmx(const KernelKey& key);

 private:
  static constexpr int kTile = 16;              // rows and f32 columns of a C tile
  static constexpr int kStageBytes = 32 * 128;  // a 32x32 f32 block of C on the stack

  void GenerateBody() override;
  // One panel: C tiles in, k loop, C tiles out. `tail`: the masked last panel.
  void EmitPanel(bool tail);
  // Moves the valid part of the C block between the stack block and C (rows x vecs vectors).
  void EmitStageCopy(int vecs, bool tail, bool to_stage);

  const KernelKey key_;
  const int row_halves_;  // A tiles in use: 1 when rows <= 16

  const Xbyak::Reg64 reg_args = abi_param1;
  const Xbyak::Reg64 reg_a = rsi;
  const Xbyak::Reg64 reg_b = rdx;
  const Xbyak::Reg64 reg_c = rcx;
  const Xbyak::Reg64 reg_ldc = r8;
  const Xbyak::Reg64 reg_blocks = r9;    // k blocks left
  const Xbyak::Reg64 reg_panels = r10;
  const Xbyak::Reg64 reg_b_panel = r11;
  const Xbyak::Reg64 reg_c_row = rax;
  const Xbyak::Reg64 reg_stride_a = rbx;  // 64: bytes between rows of an A tile
  const Xbyak::Reg64 reg_stride_b = r12;  // 128: bytes between k pairs of a B panel
  const Xbyak::Reg64 reg_c_lower = r13;   // C + 16 rows
  const Xbyak::Reg64 reg_stage = r14;     // the 64-byte aligned block on the stack
  const Xbyak::Reg64 reg_saved_sp = r15;
};

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_GEMM_KERNEL_AMX_H_
