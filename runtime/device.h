// A virtual device: an id and an allocator that accounts its memory (current and peak bytes) and
// keeps freed blocks for reuse.
#ifndef SHARDJIT_RUNTIME_DEVICE_H_
#define SHARDJIT_RUNTIME_DEVICE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "ir/allocator.h"
#include "runtime/memory_stats.h"
#include "runtime/sanitizers.h"
#include "runtime/spin_mutex.h"

namespace shardjit::runtime {

// Under AddressSanitizer freed blocks go back to malloc, so that a use after free is caught.
#ifdef SHARDJIT_ASAN
inline constexpr bool kDeviceReusesBlocks = false;
#else
inline constexpr bool kDeviceReusesBlocks = true;
#endif


// Aligned heap memory whose live bytes are counted. A program allocates the same sizes run after
// run, so freed blocks are kept for the next allocation of their size class instead of going back
// to malloc (unless kDeviceReusesBlocks is false):
//  - small ones, up to kMaxCachedBlock bytes (glibc's default mmap threshold), in power-of-two
//    classes, at most kMaxCachedBytes in all;
//  - large ones in classes of an eighth of their power of two (a block is at most 1/8 larger than
//    asked), at most twice as many bytes in all as the peak of live bytes (and that eighth), the
//    ones kept longest making room for newer ones. Past glibc's mmap threshold every fresh block is
//    mapped and page-faulted anew (a 64 MiB buffer costs milliseconds before it is written
//    once); a kept one is not.
// Cached blocks do not count as live; ReleaseCached returns them. Thread-safe: arrays may be freed
// on any thread.
class AccountingAllocator final : public ir::Allocator,
                                  public std::enable_shared_from_this<AccountingAllocator> {
 public:
  static constexpr int kMaxCachedBlockLog2 = 17;
  static constexpr size_t kMaxCachedBlock = size_t{1} << kMaxCachedBlockLog2;
  static constexpr size_t kMaxCachedBytes = size_t{4} << 20;

  AccountingAllocator() = default;
  ~AccountingAllocator() override;
  AccountingAllocator(const AccountingAllocator&) = delete;
  AccountingAllocator& operator=(const AccountingAllocator&) = delete;

  void* Allocate(size_t bytes) override;
  void Deallocate(void* ptr, size_t bytes) override;
  // Arrays may outlive their runtime: their memory keeps the allocator alive.
  std::shared_ptr<ir::Allocator> KeepAlive() override { return shared_from_this(); }
  MemoryStats stats() const { return {current_.load(), peak_.load()}; }
  // Restarts peak tracking from the current figure.
  void ResetPeak() { peak_.store(current_.load()); }
  // Bytes held in freed blocks kept for reuse (small and large).
  size_t cached_bytes() const;
  // Returns every kept block to malloc.
  void ReleaseCached();
  // The block size a large request (> kMaxCachedBlock) is served with: `bytes` rounded up to an
  // eighth of its power of two.
  static size_t LargeClassBytes(size_t bytes);

 private:
  static constexpr int kMinClassLog2 = 6;  // 64 bytes
  static constexpr int kClasses = kMaxCachedBlockLog2 - kMinClassLog2 + 1;
  // The size class of `bytes` (<= kMaxCachedBlock) and its block size.
  static int ClassOf(size_t bytes);
  static size_t ClassBytes(int cls) { return size_t{1} << (cls + kMinClassLog2); }
  void* AllocateLarge(size_t bytes);
  void DeallocateLarge(void* ptr, size_t bytes);

  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
  mutable SpinMutex mu_;
  std::vector<void*> free_[kClasses];  // under mu_
  size_t cached_bytes_ = 0;            // under mu_: small blocks kept
  struct LargeBlock {
    size_t bytes;
    void* ptr;
  };
  using LargeList = std::list<LargeBlock>;
  // Kept large blocks, oldest first, and by class (each class's most recent last); under mu_.
  LargeList large_free_;
  absl::flat_hash_map<size_t, std::vector<LargeList::iterator>> large_by_class_;
  size_t cached_large_bytes_ = 0;  // under mu_
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
