#include "backends/x86/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "xbyak/xbyak_util.h"

namespace shardjit::backends::x86 {
namespace {

using Cpu = Xbyak::util::Cpu;

constexpr int kCapUnset = -1;
std::atomic<int> g_cap{kCapUnset};

// AMX-TILE and AMX-BF16 in CPUID, tile state enabled by the OS (XCR0 bits 17 and 18), and the
// process's permission to use it (Linux grants it on request, for every thread, from 5.16).
bool AmxUsable(const Cpu& cpu) {
  if (!cpu.has(Cpu::tAMX_TILE) || !cpu.has(Cpu::tAMX_BF16)) return false;
  uint32_t lo = 0, hi = 0;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  constexpr uint32_t kTileCfg = 1u << 17, kTileData = 1u << 18;
  if ((lo & (kTileCfg | kTileData)) != (kTileCfg | kTileData)) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

IsaLevel Detect() {
  Cpu cpu;
  if (!cpu.has(Cpu::tAVX2) || !cpu.has(Cpu::tFMA)) return IsaLevel::kReference;
  // Xbyak reports AVX-512 only when the OS saves the opmask and zmm state (XCR0).
  const bool avx512 = cpu.has(Cpu::tAVX512F) && cpu.has(Cpu::tAVX512BW) &&
                      cpu.has(Cpu::tAVX512VL) && cpu.has(Cpu::tAVX512DQ);
  if (!avx512) return IsaLevel::kAvx2;
  if (!cpu.has(Cpu::tAVX512_BF16)) return IsaLevel::kAvx512;
  return AmxUsable(cpu) ? IsaLevel::kAmxBf16 : IsaLevel::kAvx512Bf16;
}

IsaLevel CapFromEnv() {
  const char* env = std::getenv("SHARDJIT_MAX_CPU_ISA");
  if (env == nullptr) return IsaLevel::kAmxBf16;
  return ParseIsa(env).value_or(IsaLevel::kAmxBf16);
}

// "48K", "1024K", "32M" or a plain byte count, as in /sys/devices/system/cpu/*/cache.
int64_t ParseCacheSize(std::string s) {
  s = std::string(absl::StripAsciiWhitespace(s));
  int64_t scale = 1;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'M')) {
    scale = s.back() == 'K' ? 1 << 10 : 1 << 20;
    s.pop_back();
  }
  int64_t v = 0;
  return absl::SimpleAtoi(s, &v) ? v * scale : 0;
}

// Size of the data or unified cache of `level` seen by cpu0, from sysfs; 0 if unknown.
int64_t SysfsCacheSize(int level) {
  for (int index = 0; index < 8; ++index) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    if (!level_file || !type_file || !size_file) break;
    int l = 0;
    std::string type, size;
    level_file >> l;
    type_file >> type;
    size_file >> size;
    if (l == level && type != "Instruction") return ParseCacheSize(size);
  }
  return 0;
}

int64_t Clamp(int64_t v, int64_t lo, int64_t hi, int64_t fallback) {
  return v <= 0 ? fallback : std::clamp(v, lo, hi);
}

CacheSizes DetectCaches() {
  CacheSizes defaults;
  int64_t size[3] = {0, 0, 0};
  Cpu cpu;
  for (uint32_t i = 0; i < cpu.getDataCacheLevels() && i < 3; ++i) {
    size[i] = cpu.getDataCacheSize(i);
  }
  for (int i = 0; i < 3; ++i) {
    if (size[i] <= 0) size[i] = SysfsCacheSize(i + 1);
  }
  const int names[3] = {_SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE};
  for (int i = 0; i < 3; ++i) {
    if (size[i] <= 0) size[i] = sysconf(names[i]);
  }
  CacheSizes c;
  c.l1d = Clamp(size[0], 16 << 10, 256 << 10, defaults.l1d);
  c.l2 = Clamp(size[1], 128 << 10, 16 << 20, defaults.l2);
  c.l3 = Clamp(size[2], 1 << 20, 512 << 20, defaults.l3);
  return c;
}

}  // namespace

std::string_view IsaName(IsaLevel isa) {
  switch (isa) {
    case IsaLevel::kReference:
      return "reference";
    case IsaLevel::kAvx2:
      return "avx2";
    case IsaLevel::kAvx512:
      return "avx512";
    case IsaLevel::kAvx512Bf16:
      return "avx512_bf16";
    case IsaLevel::kAmxBf16:
      return "amx_bf16";
  }
  return "unknown";
}

std::optional<IsaLevel> ParseIsa(std::string_view name) {
  std::string lower = absl::AsciiStrToLower(absl::string_view(name.data(), name.size()));
  for (IsaLevel isa : {IsaLevel::kReference, IsaLevel::kAvx2, IsaLevel::kAvx512,
                       IsaLevel::kAvx512Bf16, IsaLevel::kAmxBf16}) {
    if (lower == IsaName(isa)) return isa;
  }
  if (lower == "avx512_core") return IsaLevel::kAvx512;
  if (lower == "avx512_core_bf16") return IsaLevel::kAvx512Bf16;
  if (lower == "avx512_core_amx") return IsaLevel::kAmxBf16;
  return std::nullopt;
}

IsaLevel DetectedIsa() {
  static const IsaLevel detected = Detect();
  return detected;
}

void SetMaxIsa(IsaLevel isa) { g_cap.store(static_cast<int>(isa), std::memory_order_relaxed); }

IsaLevel MaxIsa() {
  int cap = g_cap.load(std::memory_order_relaxed);
  if (cap != kCapUnset) return static_cast<IsaLevel>(cap);
  static const IsaLevel from_env = CapFromEnv();
  return from_env;
}

IsaLevel ActiveIsa() { return std::min(DetectedIsa(), MaxIsa()); }

bool DetectedAvx512Vnni() {
  static const bool detected =
      DetectedIsa() >= IsaLevel::kAvx512 && Cpu().has(Cpu::tAVX512_VNNI);
  return detected;
}

bool Avx512VnniUsable() { return DetectedAvx512Vnni() && ActiveIsa() >= IsaLevel::kAvx512; }

const CacheSizes& HostCaches() {
  static const CacheSizes caches = DetectCaches();
  return caches;
}

const CpuIdentity& HostCpu() {
  static const CpuIdentity cpu = [] {
    CpuIdentity id{"unknown"};
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &c, &d)) {
      char vendor[13] = {};
      std::memcpy(vendor, &b, 4);
      std::memcpy(vendor + 4, &d, 4);
      std::memcpy(vendor + 8, &c, 4);
      if (vendor[0] != 0) id.vendor = vendor;
    }
    if (__get_cpuid(1, &a, &b, &c, &d)) {
      id.family = (a >> 8) & 0xf;
      id.model = (a >> 4) & 0xf;
      if (id.family == 0xf) id.family += (a >> 20) & 0xff;
      if (id.family >= 6) id.model += ((a >> 16) & 0xf) << 4;
    }
    return id;
  }();
  return cpu;
}

}  // namespace shardjit::backends::x86
