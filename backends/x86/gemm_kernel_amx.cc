#include "backends/x86/gemm_kernel_amx.h"

#include <cstddef>

namespace shardjit::backends::x86 {

using Xbyak::Label;
using Xbyak::Tmm;
using Xbyak::Zmm;

bool GemmKernelAmx::Supports(const KernelKey& key) {
  return key.layout == PanelLayout::kAmxTiles && key.isa >= IsaLevel::kAmxBf16 && key.mr == 32 &&
         key.nr == 32 && key.rows >= 1 && key.rows <= 32 && key.tail_vecs >= 0 &&
         key.tail_vecs <= 2 && key.stream == RowSource::kNone;
}

GemmKernelAmx::GemmKernelAmx(const KernelKey& key)
    : JitGenerator(key.Name()), key_(key), row_halves_(key.rows > kTile ? 2 : 1) {}

void GemmKernelAmx::GenerateBody() {
  // The stack block (C staging) and, after it, the 64-byte tile configuration.
  mov(reg_saved_sp, rsp);
  sub(rsp, kStageBytes + 128);
  and_(rsp, -64);
  mov(reg_stage, rsp);
  const Xbyak::Address config = ptr[reg_stage + kStageBytes];
  vpxord(zmm0, zmm0, zmm0);
  vmovups(config, zmm0);
  mov(byte[reg_stage + kStageBytes], 1);  // palette 1
  for (int t = 0; t < 8; ++t) {
    mov(word[reg_stage + kStageBytes + 16 + 2 * t], 64);  // bytes per row
    mov(byte[reg_stage + kStageBytes + 48 + t], kTile);   // rows
  }
  ldtilecfg(config);

  mov(reg_ldc, ptr[reg_args + offsetof(MicroKernelArgs, ldc)]);
  mov(reg_b_panel, ptr[reg_args + offsetof(MicroKernelArgs, b)]);
  mov(reg_c, ptr[reg_args + offsetof(MicroKernelArgs, c)]);
  mov(reg_panels, ptr[reg_args + offsetof(MicroKernelArgs, n_panels)]);
  mov(reg_stride_a, 64);
  mov(reg_stride_b, key_.nr * 4);
  for (int v = 0; v < key_.tail_vecs; ++v) {
    kmovw(Xbyak::Opmask(1 + v), ptr[reg_args + offsetof(MicroKernelArgs, vec_mask) + 4 * v]);
  }
  Label panel_loop, panels_done;
  test(reg_panels, reg_panels);
  jz(panels_done, T_NEAR);
  L(panel_loop);
  EmitPanel(/*tail=*/false);
  add(reg_b_panel, ptr[reg_args + offsetof(MicroKernelArgs, b_panel_stride)]);
  add(reg_c, key_.nr * 4);
  dec(reg_panels);
  jnz(panel_loop, T_NEAR);
  L(panels_done);
  if (key_.tail_vecs > 0) EmitPanel(/*tail=*/true);

  tilerelease();
  mov(rsp, reg_saved_sp);
}

void GemmKernelAmx::EmitPanel(bool tail) {
  const int col_halves = tail ? key_.tail_vecs : 2;
  // Whole 32x32 blocks of C move as tiles, in place.
  const bool direct = !tail && key_.rows == 32;
  auto c_tile = [](int h, int v) { return Tmm(2 * h + v); };
  // Tile (h, v) of C in place, or in the stack block (128 bytes per row).
  auto c_address = [&](int h, int v) {
    return direct ? ptr[(h == 0 ? reg_c : reg_c_lower) + reg_ldc + v * 64]
                  : ptr[reg_stage + reg_stride_b + h * kTile * 128 + v * 64];
  };
  if (direct) {
    mov(reg_c_lower, reg_ldc);
    shl(reg_c_lower, 4);
    add(reg_c_lower, reg_c);
  }

  Label zero, ready, k_loop;
  cmp(qword[reg_args + offsetof(MicroKernelArgs, accumulate)], 0);
  je(zero, T_NEAR);
  if (!direct) EmitStageCopy(col_halves, tail, /*to_stage=*/true);
  for (int h = 0; h < row_halves_; ++h) {
    for (int v = 0; v < col_halves; ++v) tileloadd(c_tile(h, v), c_address(h, v));
  }
  jmp(ready, T_NEAR);
  L(zero);
  for (int h = 0; h < row_halves_; ++h) {
    for (int v = 0; v < col_halves; ++v) tilezero(c_tile(h, v));
  }
  L(ready);

  // 32 k values per iteration: A tiles tmm4 (rows 0-15), tmm5 (16-31), B tiles tmm6, tmm7.
  mov(reg_a, ptr[reg_args + offsetof(MicroKernelArgs, a)]);
  mov(reg_b, reg_b_panel);
  mov(reg_blocks, ptr[reg_args + offsetof(MicroKernelArgs, k_steps)]);
  shr(reg_blocks, 4);
  L(k_loop);
  // Each operand tile is loaded just before its first use (tiles are not renamed: a load waits
  // for the products still reading the tile).
  tileloadd(tmm6, ptr[reg_b + reg_stride_b]);
  tileloadd(tmm4, ptr[reg_a + reg_stride_a]);
  tdpbf16ps(c_tile(0, 0), tmm4, tmm6);
  if (col_halves == 2) {
    tileloadd(tmm7, ptr[reg_b + reg_stride_b + 64]);
    tdpbf16ps(c_tile(0, 1), tmm4, tmm7);
  }
  if (row_halves_ == 2) {
    tileloadd(tmm5, ptr[reg_a + reg_stride_a + kTile * 64]);
    for (int v = 0; v < col_halves; ++v) tdpbf16ps(c_tile(1, v), tmm5, Tmm(6 + v));
  }
  add(reg_a, key_.mr * 64);
  add(reg_b, 16 * key_.nr * 4);
  dec(reg_blocks);
  jnz(k_loop, T_NEAR);

  for (int h = 0; h < row_halves_; ++h) {
    for (int v = 0; v < col_halves; ++v) tilestored(c_address(h, v), c_tile(h, v));
  }
  if (!direct) EmitStageCopy(col_halves, tail, /*to_stage=*/false);
}

void GemmKernelAmx::EmitStageCopy(int vecs, bool tail, bool to_stage) {
  mov(reg_c_row, reg_c);
  for (int i = 0; i < key_.rows; ++i) {
    for (int v = 0; v < vecs; ++v) {
      const Zmm z(i % 8 * 2 + v);
      const Xbyak::Address stage = ptr[reg_stage + i * 128 + v * 64];
      const Xbyak::Address c = ptr[reg_c_row + v * 64];
      const Xbyak::Opmask mask(1 + v);
      if (to_stage) {
        if (tail) {
          vmovups(z | mask | T_z, c);
        } else {
          vmovups(z, c);
        }
        vmovups(stage, z);
      } else {
        vmovups(z, stage);
        if (tail) {
          vmovups(c | mask, z);
        } else {
          vmovups(c, z);
        }
      }
    }
    if (i + 1 < key_.rows) add(reg_c_row, reg_ldc);
  }
}

}  // namespace shardjit::backends::x86
