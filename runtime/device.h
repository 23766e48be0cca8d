// A virtual device: an id and an allocator that accounts its memory (current and peak bytes).
#ifndef SHARDJIT_RUNTIME_DEVICE_H_
#define SHARDJIT_RUNTIME_DEVICE_H_

#include <atomic>
#include <cstdint>

#include "ir/tensor.h"

namespace shardjit::runtime {

struct MemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
};

// Aligned heap memory whose live bytes are counted.
class AccountingAllocator final : public ir::Allocator {
 public:
  void* Allocate(size_t bytes) override;
  void Deallocate(void* ptr, size_t bytes) override;
  MemoryStats stats() const { return {current_.load(), peak_.load()}; }
  // Restarts peak tracking from the current figure.
  void ResetPeak() { peak_.store(current_.load()); }

 private:
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
};

class Device {
 public:
  explicit Device(int id) : id_(id) {}
  int id() const { return id_; }
  AccountingAllocator* allocator() { return &allocator_; }
  MemoryStats memory() const { return allocator_.stats(); }

 private:
  int id_;
  AccountingAllocator allocator_;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_DEVICE_H_
