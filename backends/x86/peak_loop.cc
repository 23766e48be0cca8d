#include "backends/x86/peak_loop.h"

#include <algorithm>
#include <chrono>

#include "backends/x86/cpu_features.h"

namespace shardjit::backends::x86 {

PeakLoop::PeakLoop(Kind kind, int accumulators) {
  if (kind == Kind::kAmxTdpbf16) {
    accumulators = std::clamp(accumulators, 1, 4);
    // Every tile 16 rows of 64 bytes (palette 1), zero.
    sub(rsp, 64);
    vpxord(zmm0, zmm0, zmm0);
    vmovups(ptr[rsp], zmm0);
    mov(byte[rsp], 1);
    for (int t = 0; t < 8; ++t) {
      mov(word[rsp + 16 + 2 * t], 64);
      mov(byte[rsp + 48 + t], 16);
    }
    ldtilecfg(ptr[rsp]);
    for (int t = 0; t < 8; ++t) tilezero(Xbyak::Tmm(t));
  }
  mov(rax, rdi);
  Xbyak::Label loop;
  L(loop);
  for (int i = 0; i < accumulators; ++i) {
    switch (kind) {
      case Kind::kDpbf16Zmm:
        vdpbf16ps(Xbyak::Zmm(i), Xbyak::Zmm(30), Xbyak::Zmm(31));
        break;
      case Kind::kFmaZmm:
        vfmadd231ps(Xbyak::Zmm(i), Xbyak::Zmm(30), Xbyak::Zmm(31));
        break;
      case Kind::kVpdpbusdZmm:
        vpdpbusd(Xbyak::Zmm(i), Xbyak::Zmm(30), Xbyak::Zmm(31));
        break;
      case Kind::kFmaYmm:
        vfmadd231ps(Xbyak::Ymm(i), Xbyak::Ymm(14), Xbyak::Ymm(15));
        break;
      case Kind::kAmxTdpbf16:
        tdpbf16ps(Xbyak::Tmm(i), Xbyak::Tmm(4), Xbyak::Tmm(6));
        break;
    }
  }
  dec(rax);
  jnz(loop);
  if (kind == Kind::kAmxTdpbf16) {
    tilerelease();
    add(rsp, 64);
  }
  vzeroupper();
  ret();
  ready();
}

double PeakLoop::FlopsPerInstruction(Kind kind) {
  switch (kind) {
    case Kind::kDpbf16Zmm:
      return 64;
    case Kind::kFmaZmm:
      return 32;
    case Kind::kVpdpbusdZmm:
      return 128;
    case Kind::kFmaYmm:
      return 16;
    case Kind::kAmxTdpbf16:
      return 16 * 16 * 32 * 2;
  }
  return 0;
}

namespace {

// Flops per second of `kind` on this core: the best of a few short timed runs.
double MeasurePeak(PeakLoop::Kind kind) {
  constexpr int kAccumulators = 24;
  constexpr int64_t kIterations = 2048;
  PeakLoop loop(kind, kAccumulators);
  loop.Run(kIterations);  // warm up (and wake the vector units)
  double best = 0;
  for (int trial = 0; trial < 5; ++trial) {
    const auto start = std::chrono::steady_clock::now();
    loop.Run(kIterations);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds > 0) {
      best = std::max(best, kIterations * kAccumulators * PeakLoop::FlopsPerInstruction(kind) /
                                seconds);
    }
  }
  return best;
}

}  // namespace

bool Bf16DotProductBeatsFma() {
  static const bool beats = [] {
    if (DetectedIsa() < IsaLevel::kAvx512Bf16) return false;
    return MeasurePeak(PeakLoop::Kind::kDpbf16Zmm) > MeasurePeak(PeakLoop::Kind::kFmaZmm);
  }();
  return beats;
}

}  // namespace shardjit::backends::x86
