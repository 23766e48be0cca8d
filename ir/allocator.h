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

// Plain aligned heap memory, not accounted to any device.
Allocator* HostAllocator();

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_ALLOCATOR_H_
