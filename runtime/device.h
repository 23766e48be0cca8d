// A virtual device: an id and an allocator that accounts its memory (current and peak bytes).
#ifndef SHARDJIT_RUNTIME_DEVICE_H_
#define SHARDJIT_RUNTIME_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "ir/tensor.h"

namespace shardjit::runtime {

struct MemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
};

// Aligned heap memory whose live bytes are counted.
class AccountingAllocator final : public ir::Allocator,
                                  public std::enable_shared_from_this<AccountingAllocator> {
 public:
  void* Allocate(size_t bytes) override;
  void Deallocate(void* ptr, size_t bytes) override;
  // Arrays may outlive their runtime: their memory keeps the allocator alive.
  std::shared_ptr<ir::Allocator> KeepAlive() override { return shared_from_this(); }
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
  AccountingAllocator* allocator() { return allocator_.get(); }
  MemoryStats memory() const { return allocator_->stats(); }

 private:
  int id_;
  std::shared_ptr<AccountingAllocator> allocator_ = std::make_shared<AccountingAllocator>();
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_DEVICE_H_
