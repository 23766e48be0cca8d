#include "ir/allocator.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace shardjit::ir {
namespace {

class AlignedHostAllocator final : public Allocator {
 public:
  void* Allocate(size_t bytes) override { return bytes == 0 ? nullptr : AllocateStorage(bytes); }
  void Deallocate(void* ptr, size_t bytes) override { FreeStorage(ptr, bytes); }
};

constexpr size_t kPageBytes = 4096;

size_t RoundUp(size_t x, size_t m) { return (x + m - 1) / m * m; }

}  // namespace

void* AllocateStorage(size_t bytes) {
  const size_t rounded = RoundUp(bytes, 64);
  if (rounded < kHugePageBytes) return std::aligned_alloc(64, rounded);
  // Over-mapped by a huge page, then trimmed to an aligned block of whole pages.
  const size_t block = RoundUp(rounded, kPageBytes);
  const size_t length = block + kHugePageBytes;
  void* mapped = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  char* base = static_cast<char*>(mapped);
  char* p = reinterpret_cast<char*>(RoundUp(reinterpret_cast<uintptr_t>(base), kHugePageBytes));
  if (p > base) munmap(base, p - base);
  if (base + length > p + block) munmap(p + block, base + length - (p + block));
  // Advice only: where huge pages are off or unavailable the block keeps 4 KiB pages.
  (void)madvise(p, block, MADV_HUGEPAGE);
  return p;
}

void FreeStorage(void* p, size_t bytes) {
  if (p == nullptr) return;
  const size_t rounded = RoundUp(bytes, 64);
  if (rounded < kHugePageBytes) {
    std::free(p);
  } else {
    munmap(p, RoundUp(rounded, kPageBytes));
  }
}

Allocator* HostAllocator() {
  static auto* allocator = new AlignedHostAllocator();
  return allocator;
}

}  // namespace shardjit::ir
