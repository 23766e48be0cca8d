#include "ir/allocator.h"

#include <sys/mman.h>

#include <cstdlib>

namespace shardjit::ir {
namespace {

class AlignedHostAllocator final : public Allocator {
 public:
  void* Allocate(size_t bytes) override { return bytes == 0 ? nullptr : AllocateStorage(bytes); }
  void Deallocate(void* ptr, size_t) override { std::free(ptr); }
};

}  // namespace

void* AllocateStorage(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded < kHugePageBytes) return std::aligned_alloc(64, rounded);
  void* p = nullptr;
  if (posix_memalign(&p, kHugePageBytes, rounded) != 0) return nullptr;
  // Advice only: where huge pages are off or unavailable the block keeps 4 KiB pages.
  (void)madvise(p, rounded / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
  return p;
}

Allocator* HostAllocator() {
  static auto* allocator = new AlignedHostAllocator();
  return allocator;
}

}  // namespace shardjit::ir
