#include "backends/x86/gemm_kernel_generator.h"

#include <cstddef>

namespace shardjit::backends::x86 {

using Xbyak::Label;

void GemmKernelGenerator::GenerateBody() {
  mov(reg_ldc, ptr[reg_args + offsetof(MicroKernelArgs, ldc)]);
  mov(reg_b_panel, ptr[reg_args + offsetof(MicroKernelArgs, b)]);
  mov(reg_c, ptr[reg_args + offsetof(MicroKernelArgs, c)]);
  mov(reg_panels, ptr[reg_args + offsetof(MicroKernelArgs, n_panels)]);
  if (key_.stream != RowSource::kNone) {
    mov(reg_stream_src_panel, ptr[reg_args + offsetof(MicroKernelArgs, stream_src)]);
    mov(reg_stream_dst_panel, ptr[reg_args + offsetof(MicroKernelArgs, stream_dst)]);
    mov(reg_stream_panels, ptr[reg_args + offsetof(MicroKernelArgs, stream_panels)]);
  }
  if (key_.layout == PanelLayout::kS8Quads) {
    mov(reg_col_offset, ptr[reg_args + offsetof(MicroKernelArgs, col_offset)]);
  }
  if (key_.b_in_place != RowSource::kNone) {
    mov(reg_b_step, ptr[reg_args + offsetof(MicroKernelArgs, b_step_stride)]);
    lea(reg_b_step3, ptr[reg_b_step + reg_b_step * 2]);
    imul(reg_b_ahead, reg_b_step, kInPlacePrefetchSteps);
  }
  EmitSetup();
  Label panel_loop, panels_done;
  test(reg_panels, reg_panels);
  jz(panels_done, T_NEAR);
  L(panel_loop);
  EmitBody(/*tail=*/false);
  add(reg_b_panel, ptr[reg_args + offsetof(MicroKernelArgs, b_panel_stride)]);
  add(reg_c, key_.nr * 4);
  if (key_.layout == PanelLayout::kS8Quads) {
    // A null pointer stays recognisable: advance only a set one.
    Label no_offset;
    test(reg_col_offset, reg_col_offset);
    jz(no_offset);
    add(reg_col_offset, key_.nr * 4);
    L(no_offset);
  }
  if (key_.stream != RowSource::kNone) {
    add(reg_stream_src_panel, key_.nr * RowElementBytes(key_.stream));
    add(reg_stream_dst_panel, ptr[reg_args + offsetof(MicroKernelArgs, stream_dst_panel_stride)]);
    dec(reg_stream_panels);
  }
  dec(reg_panels);
  jnz(panel_loop, T_NEAR);
  L(panels_done);
  if (key_.tail_vecs > 0) EmitBody(/*tail=*/true);
}

void GemmKernelGenerator::EmitBody(bool tail) {
  const int vecs = tail ? key_.tail_vecs : vecs_;
  EmitZero(vecs);
  EmitPrefetchC(vecs);
  mov(reg_a, ptr[reg_args + offsetof(MicroKernelArgs, a)]);
  mov(reg_b, reg_b_panel);
  mov(reg_k, ptr[reg_args + offsetof(MicroKernelArgs, k_steps)]);
  EmitKLoop(vecs, key_.stream != RowSource::kNone && !tail);
  EmitStoreC(vecs, tail);
}

void GemmKernelGenerator::EmitKLoop(int vecs, bool stream) {
  Label main_loop, remainder, remainder_loop, done;
  if (stream) {
    const bool pairs = key_.layout == PanelLayout::kBf16Pairs;
    Label stream_loop, streamed;
    cmp(reg_stream_panels, 0);
    jle(streamed, T_NEAR);
    mov(reg_stream_count, ptr[reg_args + offsetof(MicroKernelArgs, stream_iters)]);
    test(reg_stream_count, reg_stream_count);
    jz(streamed, T_NEAR);
    mov(reg_stream_src, reg_stream_src_panel);
    mov(reg_stream_dst, reg_stream_dst_panel);
    if (pairs) {  // the second row of each step, half a step further
      mov(reg_stream_src_hi, ptr[reg_args + offsetof(MicroKernelArgs, stream_src_stride)]);
      shr(reg_stream_src_hi, 1);
      add(reg_stream_src_hi, reg_stream_src);
    }
    // Prefetch the same rows of the next panel; in the last panel, those of the next call's
    // first panel.
    Label ahead_set;
    mov(reg_stream_ahead, key_.nr * RowElementBytes(key_.stream));
    cmp(reg_stream_panels, 1);
    jne(ahead_set);
    mov(reg_stream_ahead, ptr[reg_args + offsetof(MicroKernelArgs, stream_last_ahead)]);
    L(ahead_set);
    if (!pairs) {
      // Into L2, kStreamFarPanels panels ahead; from the panel that many before the last on, the
      // rows of the next call at as many panels less (reg_ldc's register, reloaded after).
      Label far_set;
      mov(reg_stream_far, kStreamFarPanels * key_.nr * RowElementBytes(key_.stream));
      cmp(reg_stream_panels, kStreamFarPanels);
      jg(far_set);
      mov(reg_stream_far, ptr[reg_args + offsetof(MicroKernelArgs, stream_far_wrap)]);
      L(far_set);
    }
    L(stream_loop);
    // The copies and prefetches among the FMAs, spread out, not in a burst at the loop's end:
    // copy j at step j * gap, its prefetch half a gap later, then on to the next row.
    const int gap = kStreamSteps / key_.stream_rows;
    for (int s = 0; s < kStreamSteps; ++s) {
      EmitStep(vecs, s);
      if (s % gap == 0) EmitStreamCopy();
      if (s % gap == gap / 2) {
        EmitStreamPrefetch();
        add(reg_stream_src, ptr[reg_args + offsetof(MicroKernelArgs, stream_src_stride)]);
        if (pairs) {
          add(reg_stream_src_hi, ptr[reg_args + offsetof(MicroKernelArgs, stream_src_stride)]);
        }
        add(reg_stream_dst, key_.nr * 4);
      }
    }
    add(reg_a, kStreamSteps * key_.mr * 4);
    add(reg_b, kStreamSteps * key_.nr * 4);
    sub(reg_k, kStreamSteps);
    dec(reg_stream_count);
    jnz(stream_loop, T_NEAR);
    mov(reg_ldc, ptr[reg_args + offsetof(MicroKernelArgs, ldc)]);
    L(streamed);
  }
  cmp(reg_k, kUnroll);
  jl(remainder, T_NEAR);
  L(main_loop);
  for (int s = 0; s < kUnroll; ++s) {
    EmitStep(vecs, s);
    if (key_.b_in_place != RowSource::kNone) EmitInPlacePrefetch(s);
  }
  add(reg_a, kUnroll * key_.mr * 4);
  EmitAdvanceB(kUnroll);
  sub(reg_k, kUnroll);
  cmp(reg_k, kUnroll);
  jge(main_loop, T_NEAR);
  L(remainder);
  test(reg_k, reg_k);
  jz(done, T_NEAR);
  L(remainder_loop);
  EmitStep(vecs, 0);
  if (key_.b_in_place != RowSource::kNone) EmitInPlacePrefetch(0);
  add(reg_a, key_.mr * 4);
  EmitAdvanceB(1);
  dec(reg_k);
  jnz(remainder_loop, T_NEAR);
  L(done);
}

void GemmKernelGenerator::EmitInPlacePrefetch(int step) {
  // The row kInPlacePrefetchSteps steps on: InPlaceRow from a base that many rows further
  // (reg_b + reg_b_ahead, computed at step 0 into reg_c_row, free in the k loop).
  if (step == 0) lea(reg_c_row, ptr[reg_b + reg_b_ahead]);
  for (int line = 0; line < key_.nr * RowElementBytes(key_.b_in_place); line += 64) {
    prefetcht0(InPlaceRow(reg_c_row, step, line));
  }
}

void GemmKernelGenerator::EmitAdvanceB(int steps) {
  if (key_.b_in_place == RowSource::kNone) {
    add(reg_b, steps * key_.nr * 4);
  } else if (steps == kUnroll) {
    lea(reg_b, ptr[reg_b + reg_b_step * 4]);
  } else {
    for (int s = 0; s < steps; ++s) add(reg_b, reg_b_step);
  }
}

void GemmKernelGenerator::EmitStreamCopy() {
  const int src_bytes = RowElementBytes(key_.stream);
  const Xbyak::Xmm v = CopyRegister(0);
  for (int j = 0; j < vecs_; ++j) {
    const Xbyak::Address src = ptr[reg_stream_src + j * lanes_ * src_bytes];
    if (key_.layout == PanelLayout::kBf16Pairs) {
      // Pair (lo, hi) of column c is the u32 lo | hi << 16.
      const Xbyak::Xmm hi = CopyRegister(1);
      vpmovzxwd(v, src);
      vpmovzxwd(hi, ptr[reg_stream_src_hi + j * lanes_ * src_bytes]);
      vpslld(hi, hi, 16);
      vpord(v, v, hi);
    } else if (key_.stream == RowSource::kBf16) {
      vpmovzxwd(v, src);  // a bf16 is the high half of its f32
      vpslld(v, v, 16);
    } else {
      vmovups(v, src);
    }
    vmovups(ptr[reg_stream_dst + j * lanes_ * 4], v);
  }
}

void GemmKernelGenerator::EmitStreamPrefetch() {
  const int panel_bytes = key_.nr * RowElementBytes(key_.stream);
  const bool pairs = key_.layout == PanelLayout::kBf16Pairs;
  // The next panel's rows into L1; into L2 well ahead, those kStreamFarPanels panels on (the
  // next panel's fetch then finds them there), for kF32 at reg_stream_far's distance.
  for (int line = 0; line < panel_bytes; line += 64) {
    prefetcht0(ptr[reg_stream_src + reg_stream_ahead + line]);
    if (pairs) {
      prefetcht0(ptr[reg_stream_src_hi + reg_stream_ahead + line]);
      prefetcht2(ptr[reg_stream_src + kStreamFarPanels * panel_bytes + line]);
      prefetcht2(ptr[reg_stream_src_hi + kStreamFarPanels * panel_bytes + line]);
    } else {
      prefetcht2(ptr[reg_stream_src + reg_stream_far + line]);
    }
  }
}

void GemmKernelGenerator::EmitStoreC(int vecs, bool tail) {
  EmitBeforeStoreC(vecs, tail);
  Label store;
  cmp(qword[reg_args + offsetof(MicroKernelArgs, accumulate)], 0);
  je(store, T_NEAR);
  ForEachCRow([&](int i) {
    for (int j = 0; j < vecs; ++j) EmitAddC(i, j, CVector(j), tail);
  });
  L(store);
  ForEachCRow([&](int i) {
    for (int j = 0; j < vecs; ++j) EmitStoreCVector(i, j, CVector(j), tail);
  });
}

}  // namespace shardjit::backends::x86
