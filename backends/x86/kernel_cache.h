// Process-wide, thread-safe cache of generated GEMM micro-kernels, keyed by KernelKey. Records
// how many kernels were generated and the time spent generating them.
#ifndef SHARDJIT_BACKENDS_X86_KERNEL_CACHE_H_
#define SHARDJIT_BACKENDS_X86_KERNEL_CACHE_H_

#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include <mutex>
#include "backends/x86/gemm.h"
#include "backends/x86/gemm_kernel.h"
#include "backends/x86/jit_generator.h"

namespace shardjit::backends::x86 {

class KernelCache {
 public:
  static KernelCache& Global();

  // The kernel for `key`, generated on first use. Unimplemented when no generator supports the
  // key; Internal when generation fails (the failure is cached too).
  absl::StatusOr<MicroKernelFn> Get(const KernelKey& key);

  KernelCacheStats stats() const;

 private:
  struct Entry {
    std::unique_ptr<JitGenerator> generator;  // null when generation failed
    absl::Status status;
  };

  static absl::StatusOr<std::unique_ptr<JitGenerator>> Generate(const KernelKey& key);

  mutable std::mutex mu_;
  absl::flat_hash_map<KernelKey, Entry> entries_ ABSL_GUARDED_BY(mu_);
  KernelCacheStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_KERNEL_CACHE_H_
