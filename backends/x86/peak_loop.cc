#include "backends/x86/peak_loop.h"

#include <algorithm>
#include <chrono>

#include "backends/x86/cpu_features.h"

namespace shardjit::backends::x86 {

PeakLoop::PeakLoop(Kind kind, int accumulators) {
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
      case Kind::kFmaYmm:
        vfmadd231ps(Xbyak::Ymm(i), Xbyak::Ymm(14), Xbyak::Ymm(15));
        break;
    }
  }
  dec(rax);
  jnz(loop);
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
    case Kind::kFmaYmm:
      return 16;
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
