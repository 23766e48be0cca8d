#include "backends/x86/gemm_kernel_avx512.h"

#include <cstddef>

namespace shardjit::backends::x86 {

bool GemmKernelAvx512::Supports(const KernelKey& key) {
  if (key.nr % kLanes != 0 || key.nr / kLanes > 7 || key.nr <= 0) return false;
  const int vecs = key.nr / kLanes;
  const bool tile_fits = key.rows >= 1 && key.rows <= key.mr && key.rows * vecs + vecs <= 32 &&
                         key.tail_vecs >= 0 && key.tail_vecs <= vecs;
  if (key.layout == PanelLayout::kS8Quads) {
    // vpdpbusd takes the u8 operand from a register: the broadcast needs a spare one.
    return tile_fits && key.rows * vecs + vecs < 32 && key.isa == IsaLevel::kAvx512 &&
           key.stream == RowSource::kNone;
  }
  return tile_fits &&
         (key.layout == PanelLayout::kF32 ||
          (key.layout == PanelLayout::kBf16Pairs && key.isa >= IsaLevel::kAvx512Bf16 &&
           key.stream != RowSource::kF32 &&
           (key.stream == RowSource::kNone || vecs >= 2)));  // the copy needs two B registers
}

GemmKernelAvx512::GemmKernelAvx512(const KernelKey& key) : GemmKernelGenerator(key, kLanes) {}

void GemmKernelAvx512::EmitSetup() {
  for (int v = 0; v < key_.tail_vecs; ++v) {
    kmovw(TailMask(v), ptr[reg_args + offsetof(MicroKernelArgs, vec_mask) + 4 * v]);
  }
}

void GemmKernelAvx512::EmitZero(int vecs) {
  for (int i = 0; i < key_.rows; ++i) {
    for (int j = 0; j < vecs; ++j) vpxord(Acc(i, j), Acc(i, j), Acc(i, j));
  }
}

void GemmKernelAvx512::EmitStep(int vecs, int step) {
  for (int j = 0; j < vecs; ++j) {
    LoadB(B(j), step, j);
  }
  // Each A element (an f32, or a bf16 pair) is broadcast once into a free register, then feeds
  // the row's FMAs from it: one load per row instead of one per FMA, which keeps a CPU with two
  // load ports (Intel) from waiting on its loads. Without a free register, the FMAs broadcast
  // from memory.
  // Registers: accumulators from zmm0, B vectors down from zmm31 (for the whole tile, whatever
  // `vecs` this step uses); the one after the last accumulator is free when they do not meet.
  const bool spare = key_.rows * vecs_ + vecs_ < 32;
  const Xbyak::Zmm broadcast(key_.rows * vecs_);
  if (key_.layout == PanelLayout::kS8Quads) {  // a row's four u8 against each column's four s8
    for (int i = 0; i < key_.rows; ++i) {
      vpbroadcastd(broadcast, ptr[reg_a + (step * key_.mr + i) * 4]);
      for (int j = 0; j < vecs; ++j) vpdpbusd(Acc(i, j), broadcast, B(j));
    }
    return;
  }
  for (int i = 0; i < key_.rows; ++i) {
    const Xbyak::Address a = ptr_b[reg_a + (step * key_.mr + i) * 4];
    if (spare) vbroadcastss(broadcast, ptr[reg_a + (step * key_.mr + i) * 4]);
    for (int j = 0; j < vecs; ++j) {
      if (key_.layout == PanelLayout::kBf16Pairs) {
        if (spare) {
          vdpbf16ps(Acc(i, j), B(j), broadcast);
        } else {
          vdpbf16ps(Acc(i, j), B(j), a);
        }
      } else if (spare) {
        vfmadd231ps(Acc(i, j), B(j), broadcast);
      } else {
        vfmadd231ps(Acc(i, j), B(j), a);
      }
    }
  }
}

void GemmKernelAvx512::EmitPrefetchC(int vecs) {
  ForEachCRow([&](int) {
    for (int j = 0; j < vecs; ++j) prefetcht0(CVector(j));
  });
}

void GemmKernelAvx512::EmitBeforeStoreC(int vecs, bool /*tail*/) {
  if (key_.layout != PanelLayout::kS8Quads) return;
  // The column offsets (col_offset), when set; masked-off lanes are never stored.
  Xbyak::Label none;
  test(reg_col_offset, reg_col_offset);
  jz(none, T_NEAR);
  for (int j = 0; j < vecs; ++j) {
    vmovdqu32(B(j), ptr[reg_col_offset + j * kLanes * 4]);
    for (int i = 0; i < key_.rows; ++i) vpaddd(Acc(i, j), Acc(i, j), B(j));
  }
  L(none);
}

void GemmKernelAvx512::EmitAddC(int row, int vec, const Xbyak::Address& c, bool tail) {
  if (key_.layout == PanelLayout::kS8Quads) {
    if (tail) {
      vpaddd(Acc(row, vec) | TailMask(vec), Acc(row, vec), c);
    } else {
      vpaddd(Acc(row, vec), Acc(row, vec), c);
    }
    return;
  }
  if (tail) {
    vaddps(Acc(row, vec) | TailMask(vec), Acc(row, vec), c);
  } else {
    vaddps(Acc(row, vec), Acc(row, vec), c);
  }
}

void GemmKernelAvx512::EmitStoreCVector(int row, int vec, const Xbyak::Address& c, bool tail) {
  if (tail) {
    vmovups(c | TailMask(vec), Acc(row, vec));
  } else {
    vmovups(c, Acc(row, vec));
  }
}

}  // namespace shardjit::backends::x86
