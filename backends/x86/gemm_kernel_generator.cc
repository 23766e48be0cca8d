#include "backends/x86/gemm_kernel_generator.h"

#include <cstddef>

namespace shardjit::backends::x86 {

using Xbyak::Label;

void GemmKernelGenerator::GenerateBody() {
  mov(reg_ldc, ptr[reg_args + offsetof(MicroKernelArgs, ldc)]);
  mov(reg_b_panel, ptr[reg_args + offsetof(MicroKernelArgs, b)]);
  mov(reg_c, ptr[reg_args + offsetof(MicroKernelArgs, c)]);
  mov(reg_panels, ptr[reg_args + offsetof(MicroKernelArgs, n_panels)]);
  EmitSetup();
  Label panel_loop, panels_done;
  test(reg_panels, reg_panels);
  jz(panels_done, T_NEAR);
  L(panel_loop);
  EmitBody(/*tail=*/false);
  add(reg_b_panel, ptr[reg_args + offsetof(MicroKernelArgs, b_panel_stride)]);
  add(reg_c, key_.nr * 4);
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
  EmitKLoop(vecs);
  EmitStoreC(vecs, tail);
}

void GemmKernelGenerator::EmitKLoop(int vecs) {
  Label main_loop, remainder, remainder_loop, done;
  cmp(reg_k, kUnroll);
  jl(remainder, T_NEAR);
  L(main_loop);
  for (int s = 0; s < kUnroll; ++s) EmitStep(vecs, s);
  add(reg_a, kUnroll * key_.mr * 4);
  add(reg_b, kUnroll * key_.nr * 4);
  sub(reg_k, kUnroll);
  cmp(reg_k, kUnroll);
  jge(main_loop, T_NEAR);
  L(remainder);
  test(reg_k, reg_k);
  jz(done, T_NEAR);
  L(remainder_loop);
  EmitStep(vecs, 0);
  add(reg_a, key_.mr * 4);
  add(reg_b, key_.nr * 4);
  dec(reg_k);
  jnz(remainder_loop, T_NEAR);
  L(done);
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
