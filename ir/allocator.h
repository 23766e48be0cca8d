// Where array storage comes from: the runtime's per-device accounting allocators implement this;
// HostAllocator is plain heap memory. No dependencies, so that the device allocator builds alone.
#ifndef SHARDJIT_IR_ALLOCATOR_H_
#define SHARDJIT_IR_ALLOCATOR_H_

#include <cstddef>
#include <memory>

namespace shardjit::ir {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // 64-byte aligned; may return nullptr for 0 bytes.
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Deallocate(void* ptr, size_t bytes) = 0;
  // Keeps the allocator alive while memory it made is live (null for immortal allocators).
  virtual std::shared_ptr<Allocator> KeepAlive() { return nullptr; }
};

// Plain aligned heap memory (AllocateStorage), not accounted to any device.
Allocator* HostAllocator();

// Blocks from this size up are backed by transparent huge pages where the system allows it.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Memory for array storage, 64-byte aligned, freed with FreeStorage(p, bytes) (the same bytes);
// nullptr when out of memory. A block of kHugePageBytes or more is mapped on its own, starts on a
// huge page boundary and is advised for transparent huge pages: a walk down the rows of a large
// matrix (packing a GEMM operand, a strided slice) touches a new 4 KiB page per row, and huge
// pages keep those TLB misses away. (Mapped apart from malloc's heap, so that the advice ends
// with the block.) Smaller blocks come from the heap.
void* AllocateStorage(size_t bytes);
void FreeStorage(void* p, size_t bytes);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_ALLOCATOR_H_
