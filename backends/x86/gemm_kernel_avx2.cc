#include "backends/x86/gemm_kernel_avx2.h"

#include <cstddef>

namespace shardjit::backends::x86 {

using Xbyak::Label;

bool GemmKernelAvx2::Supports(const KernelKey& key) {
  if (key.layout != PanelLayout::kF32 || key.nr % kLanes != 0 || key.nr <= 0) return false;
  const int vecs = key.nr / kLanes;
  return vecs <= 8 && key.rows >= 1 && key.rows <= key.mr && key.rows * vecs + vecs + 2 <= 16 &&
         key.tail_vecs >= 0 && key.tail_vecs <= vecs;
}

GemmKernelAvx2::GemmKernelAvx2(const KernelKey& key) : GemmKernelGenerator(key, kLanes) {}

void GemmKernelAvx2::EmitZero(int vecs) {
  for (int i = 0; i < key_.rows; ++i) {
    for (int j = 0; j < vecs; ++j) vxorps(Acc(i, j), Acc(i, j), Acc(i, j));
  }
}

void GemmKernelAvx2::EmitStep(int vecs, int step) {
  for (int j = 0; j < vecs; ++j) {
    vmovups(B(j), ptr[reg_b + (step * key_.nr + j * kLanes) * 4]);
  }
  for (int i = 0; i < key_.rows; ++i) {
    vbroadcastss(ABroadcast(i), ptr[reg_a + (step * key_.mr + i) * 4]);
    for (int j = 0; j < vecs; ++j) vfmadd231ps(Acc(i, j), B(j), ABroadcast(i));
  }
}

void GemmKernelAvx2::EmitPrefetchC(int vecs) {
  mov(reg_c_row, reg_c);
  for (int i = 0; i < key_.rows; ++i) {
    for (int j = 0; j < vecs; j += 2) prefetcht0(ptr[reg_c_row + j * kLanes * 4]);
    if (i + 1 < key_.rows) add(reg_c_row, reg_ldc);
  }
}

void GemmKernelAvx2::EmitStoreC(int vecs, bool tail) {
  if (tail) {
    for (int j = 0; j < vecs; ++j) {
      vmovdqu(TailMask(j), ptr[reg_args + offsetof(MicroKernelArgs, lane_mask) + j * kLanes * 4]);
    }
  }
  Label store;
  mov(reg_c_row, reg_c);
  cmp(qword[reg_args + offsetof(MicroKernelArgs, accumulate)], 0);
  je(store, T_NEAR);
  for (int i = 0; i < key_.rows; ++i) {
    for (int j = 0; j < vecs; ++j) {
      const Xbyak::Address c = ptr[reg_c_row + j * kLanes * 4];
      if (tail) {
        vmaskmovps(CValue(), TailMask(j), c);
        vaddps(Acc(i, j), Acc(i, j), CValue());
      } else {
        vaddps(Acc(i, j), Acc(i, j), c);
      }
    }
    if (i + 1 < key_.rows) add(reg_c_row, reg_ldc);
  }
  mov(reg_c_row, reg_c);
  L(store);
  for (int i = 0; i < key_.rows; ++i) {
    for (int j = 0; j < vecs; ++j) {
      const Xbyak::Address c = ptr[reg_c_row + j * kLanes * 4];
      if (tail) {
        vmaskmovps(c, TailMask(j), Acc(i, j));
      } else {
        vmovups(c, Acc(i, j));
      }
    }
    if (i + 1 < key_.rows) add(reg_c_row, reg_ldc);
  }
}

}  // namespace shardjit::backends::x86
