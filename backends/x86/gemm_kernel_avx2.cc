#include "backends/x86/gemm_kernel_avx2.h"

#include <cstddef>

namespace shardjit::backends::x86 {

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
    LoadB(B(j), step, j);
  }
  for (int i = 0; i < key_.rows; ++i) {
    vbroadcastss(ABroadcast(i), ptr[reg_a + (step * key_.mr + i) * 4]);
    for (int j = 0; j < vecs; ++j) vfmadd231ps(Acc(i, j), B(j), ABroadcast(i));
  }
}

void GemmKernelAvx2::EmitPrefetchC(int vecs) {
  ForEachCRow([&](int) {
    for (int j = 0; j < vecs; j += 2) prefetcht0(CVector(j));
  });
}

void GemmKernelAvx2::EmitBeforeStoreC(int vecs, bool tail) {
  if (!tail) return;
  for (int j = 0; j < vecs; ++j) {
    vmovdqu(TailMask(j), ptr[reg_args + offsetof(MicroKernelArgs, lane_mask) + j * kLanes * 4]);
  }
}

void GemmKernelAvx2::EmitAddC(int row, int vec, const Xbyak::Address& c, bool tail) {
  if (tail) {
    vmaskmovps(CValue(), TailMask(vec), c);
    vaddps(Acc(row, vec), Acc(row, vec), CValue());
  } else {
    vaddps(Acc(row, vec), Acc(row, vec), c);
  }
}

void GemmKernelAvx2::EmitStoreCVector(int row, int vec, const Xbyak::Address& c, bool tail) {
  if (tail) {
    vmaskmovps(c, TailMask(vec), Acc(row, vec));
  } else {
    vmovups(c, Acc(row, vec));
  }
}

}  // namespace shardjit::backends::x86
