// The loop skeleton shared by the GEMM micro-kernel generators: the loop over the N panels, each
// panel's body (zero the accumulators, k loop, store C) and the unrolled k loop. Subclasses emit
// the ISA-specific parts: zeroing, one k step, prefetch and the per-vector add and store of C.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_KERNEL_GENERATOR_H_
#define SHARDJIT_BACKENDS_X86_GEMM_KERNEL_GENERATOR_H_

#include "backends/x86/gemm_kernel.h"
#include "backends/x86/jit_generator.h"

namespace shardjit::backends::x86 {

class GemmKernelGenerator : public JitGenerator {
 protected:
  static constexpr int kUnroll = 4;  // k steps per main-loop iteration (BVector's four rows)

  GemmKernelGenerator(const KernelKey& key, int lanes)
      : JitGenerator(key.Name()), key_(key), lanes_(lanes), vecs_(key.nr / lanes) {}

  // Before the panel loop (e.g. loading tail masks).
  virtual void EmitSetup() {}
  virtual void EmitZero(int vecs) = 0;
  // One k step over `vecs` vectors; `step` indexes the step within an unrolled iteration.
  virtual void EmitStep(int vecs, int step) = 0;
  virtual void EmitPrefetchC(int vecs) = 0;
  // Before C is read or written (e.g. loading tail masks into vector registers).
  virtual void EmitBeforeStoreC(int /*vecs*/, bool /*tail*/) {}
  // Accumulator (row, vec) += C at `c`; stores it to `c`. `tail`: the vector is masked.
  virtual void EmitAddC(int row, int vec, const Xbyak::Address& c, bool tail) = 0;
  virtual void EmitStoreCVector(int row, int vec, const Xbyak::Address& c, bool tail) = 0;
  // Full-width vector registers free between two k steps (for the streaming copy): i = 0, and
  // i = 1 for the kBf16Pairs layout.
  virtual Xbyak::Xmm CopyRegister(int i) const = 0;

  // Loads vector `vec` of k step `step` of B into `dst` as f32 (bf16 rows widened).
  void LoadB(const Xbyak::Xmm& dst, int step, int vec) {
    if (key_.b_in_place == RowSource::kBf16) {
      vpmovzxwd(dst, BVector(step, vec));  // a bf16 is the high half of its f32
      vpslld(dst, dst, 16);
    } else {
      vmovups(dst, BVector(step, vec));
    }
  }
  // Emits body(row) for each row of the tile, with reg_c_row at that row of C.
  template <typename Body>
  void ForEachCRow(Body body) {
    mov(reg_c_row, reg_c);
    for (int i = 0; i < key_.rows; ++i) {
      body(i);
      if (i + 1 < key_.rows) add(reg_c_row, reg_ldc);
    }
  }
  // Vector `vec` of the current row of C.
  Xbyak::Address CVector(int vec) const { return ptr[reg_c_row + vec * lanes_ * 4]; }
  // Vector `vec` of k step `step` (0 .. kUnroll - 1) of the B panel at reg_b: packed, or a row
  // of B read in place (steps 0..3 at reg_b plus 0, 1, 2, 3 rows; bf16 rows are half as wide).
  Xbyak::Address BVector(int step, int vec) const {
    if (key_.b_in_place == RowSource::kNone) {
      return ptr[reg_b + (step * key_.nr + vec * lanes_) * 4];
    }
    return InPlaceRow(reg_b, step, vec * lanes_ * RowElementBytes(key_.b_in_place));
  }
  // `offset` bytes into row `step` (0 .. kUnroll - 1) of B read in place, counted from the row
  // at `base`.
  Xbyak::Address InPlaceRow(const Xbyak::Reg64& base, int step, int offset) const {
    switch (step) {
      case 0:
        return ptr[base + offset];
      case 1:
        return ptr[base + reg_b_step + offset];
      case 2:
        return ptr[base + reg_b_step * 2 + offset];
      default:
        return ptr[base + reg_b_step3 + offset];
    }
  }

  const KernelKey key_;
  const int lanes_;  // f32 lanes per vector
  const int vecs_;   // vectors per full panel

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
  // Streaming kernels: source and destination of the copy in the current k loop and at the
  // current panel's start, the distance from the source to what is prefetched, the panels left
  // to stream into (<= 0: none), the copy's iterations left (reg_c_row's register, free in the
  // k loop), and for bf16 pairs the second row of the step (reg_ldc's register, reloaded
  // after the copy).
  const Xbyak::Reg64 reg_stream_src = rbx;
  const Xbyak::Reg64 reg_stream_dst = rbp;
  const Xbyak::Reg64 reg_stream_src_panel = r12;
  const Xbyak::Reg64 reg_stream_dst_panel = r13;
  const Xbyak::Reg64 reg_stream_ahead = r14;
  const Xbyak::Reg64 reg_stream_panels = r15;
  const Xbyak::Reg64 reg_stream_count = rax;
  const Xbyak::Reg64 reg_stream_src_hi = r8;
  const Xbyak::Reg64 reg_stream_far = r8;  // kF32 layout: the distance of the L2 prefetch
  // kS8Quads kernels (which do not stream): the current panel's column offsets (col_offset).
  const Xbyak::Reg64 reg_col_offset = r12;
  // Kernels that read B in place (which do not stream): a row of B in bytes, three rows, and the
  // distance to the rows prefetched.
  const Xbyak::Reg64 reg_b_step = rbx;
  const Xbyak::Reg64 reg_b_step3 = rbp;
  const Xbyak::Reg64 reg_b_ahead = r13;

 private:
  void GenerateBody() final;
  // One panel: zero, k loop, store. `tail`: the last, partial panel.
  void EmitBody(bool tail);
  // The k loop; `stream`: its first iterations copy the stream (when panels are left).
  void EmitKLoop(int vecs, bool stream);
  // One k step of the stream: copied, and prefetched for the next panel (stream_rows per
  // iteration of the k loop).
  void EmitStreamCopy();
  void EmitStreamPrefetch();
  // In-place B: prefetches step `step`'s row kInPlacePrefetchSteps steps ahead; moves reg_b on
  // by `steps` rows.
  void EmitInPlacePrefetch(int step);
  void EmitAdvanceB(int steps);
  // Adds C when accumulating, stores; `tail`: tail_vecs vectors, masked.
  void EmitStoreC(int vecs, bool tail);
};

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_GEMM_KERNEL_GENERATOR_H_
