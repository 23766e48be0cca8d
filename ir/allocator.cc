#include "ir/allocator.h"

#include <cstdlib>

namespace shardjit::ir {
namespace {

class AlignedHostAllocator final : public Allocator {
 public:
  void* Allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  void Deallocate(void* ptr, size_t) override { std::free(ptr); }
};

}  // namespace

Allocator* HostAllocator() {
  static auto* allocator = new AlignedHostAllocator();
  return allocator;
}

}  // namespace shardjit::ir
