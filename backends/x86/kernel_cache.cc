#include "backends/x86/kernel_cache.h"

#include "absl/strings/str_cat.h"
#include "backends/executable.h"
#include "backends/x86/gemm_kernel_avx2.h"
#include "backends/x86/gemm_kernel_amx.h"
#include "backends/x86/gemm_kernel_avx512.h"
#include "base/status_macros.h"

namespace shardjit::backends::x86 {

KernelCache& KernelCache::Global() {
  static KernelCache* cache = new KernelCache();
  return *cache;
}

absl::StatusOr<std::unique_ptr<JitGenerator>> KernelCache::Generate(const KernelKey& key) {
  std::unique_ptr<JitGenerator> gen;
  if (!ValidStreamRows(key.stream_rows)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm: ", key.Name(), " copies ", key.stream_rows,
                     " steps per iteration; 1, 2, 4 or 8 are possible"));
  }
  if (!key.Consistent()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gemm: ", key.Name(), " reads B in place, which only f32 panels without a tail or a "
        "stream can"));
  }
  if (key.layout == PanelLayout::kAmxTiles) {
    if (!GemmKernelAmx::Supports(key)) {
      return absl::UnimplementedError(absl::StrCat("gemm: no generator for ", key.Name()));
    }
    gen = std::make_unique<GemmKernelAmx>(key);
  } else if (key.isa >= IsaLevel::kAvx512 && GemmKernelAvx512::Supports(key)) {
    gen = std::make_unique<GemmKernelAvx512>(key);
  } else if (key.isa == IsaLevel::kAvx2 && GemmKernelAvx2::Supports(key)) {
    gen = std::make_unique<GemmKernelAvx2>(key);
  } else {
    return absl::UnimplementedError(absl::StrCat("gemm: no generator for ", key.Name()));
  }
  RETURN_IF_ERROR(gen->Create());
  return gen;
}

absl::StatusOr<MicroKernelFn> KernelCache::Get(const KernelKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    const int64_t start_ns = base::SpanClockNs();
    absl::StatusOr<std::unique_ptr<JitGenerator>> gen = Generate(key);
    const int64_t ns = base::SpanClockNs() - start_ns;
    // A cache miss shows in the profile of the device that paid for it.
    if (base::SpanRecorder* recorder = base::ThreadSpanRecorder(); recorder != nullptr) {
      const std::string name = absl::StrCat("gemm kernel ", key.Name());
      recorder->Record({name, "compile", start_ns, ns, {}});
    }
    Entry entry;
    if (gen.ok()) {
      entry.generator = *std::move(gen);
      ++stats_.kernels;
      stats_.generation_ns += ns;
      stats_.code_bytes += static_cast<int64_t>(entry.generator->code_size());
    } else {
      entry.status = gen.status();
    }
    it = entries_.emplace(key, std::move(entry)).first;
  }
  if (!it->second.status.ok()) return it->second.status;
  return reinterpret_cast<MicroKernelFn>(const_cast<void*>(it->second.generator->code()));
}

KernelCacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace shardjit::backends::x86
