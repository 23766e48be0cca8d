// Run-time CPU feature detection for the x86 backend: ISA levels, a user cap on them (like
// ONEDNN_MAX_CPU_ISA) and data cache sizes for cache blocking.
#ifndef SHARDJIT_BACKENDS_X86_CPU_FEATURES_H_
#define SHARDJIT_BACKENDS_X86_CPU_FEATURES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace shardjit::backends::x86 {

// Ordered: a higher level implies every lower one.
enum class IsaLevel : int {
  kReference = 0,   // plain C++
  kAvx2 = 1,        // AVX2 + FMA
  kAvx512 = 2,      // AVX512 F + BW + VL + DQ
  kAvx512Bf16 = 3,  // kAvx512 + AVX512_BF16
  kAmxBf16 = 4,     // kAvx512Bf16 + AMX-TILE + AMX-BF16, with the OS's permission to use tiles
};

// "reference", "avx2", "avx512", "avx512_bf16", "amx_bf16".
std::string_view IsaName(IsaLevel isa);
// Inverse of IsaName (case-insensitive); nullopt for unknown names.
std::optional<IsaLevel> ParseIsa(std::string_view name);

// The best level this CPU and OS support (cached after the first call).
IsaLevel DetectedIsa();

// Caps the level used by every dispatcher; overrides SHARDJIT_MAX_CPU_ISA. May be called at any
// time (tests lower and restore it); kernels already generated stay cached.
void SetMaxIsa(IsaLevel isa);
// The cap: SetMaxIsa's value, else SHARDJIT_MAX_CPU_ISA, else kAmxBf16 (no cap).
IsaLevel MaxIsa();
// min(DetectedIsa(), MaxIsa()).
IsaLevel ActiveIsa();

// Whether the CPU has AVX512_VNNI (vpdpbusd: u8 x s8 products summed in fours into s32) with
// AVX-512 (DetectedIsa() >= kAvx512), which the int8 GEMM uses from the kAvx512 level on.
bool DetectedAvx512Vnni();
// DetectedAvx512Vnni() while ActiveIsa() >= kAvx512 (the cap governs it as it does the levels).
bool Avx512VnniUsable();

// Data cache sizes in bytes, per core for L1d and L2, and the L3 of this core's complex.
struct CacheSizes {
  int64_t l1d = 32 << 10;
  int64_t l2 = 512 << 10;
  int64_t l3 = 8 << 20;
};

// Detected once: Xbyak (Intel), then sysfs, then sysconf, else the defaults above.
const CacheSizes& HostCaches();

// The CPU's vendor ("GenuineIntel", "AuthenticAMD"; "unknown" when cpuid gives none) and its
// family and model as cpuid reports them, the extended fields folded in (AMD Zen 5: 26).
struct CpuIdentity {
  std::string vendor;
  unsigned family = 0, model = 0;
};
const CpuIdentity& HostCpu();

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_CPU_FEATURES_H_
