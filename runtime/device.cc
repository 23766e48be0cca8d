#include "runtime/device.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <mutex>

namespace shardjit::runtime {

AccountingAllocator::~AccountingAllocator() { ReleaseCached(); }

int AccountingAllocator::ClassOf(size_t bytes) {
  const size_t rounded = std::bit_ceil(std::max<size_t>(bytes, size_t{1} << kMinClassLog2));
  return std::countr_zero(rounded) - kMinClassLog2;
}

size_t AccountingAllocator::LargeClassBytes(size_t bytes) {
  const size_t step = std::bit_floor(bytes) / 8;
  return (bytes + step - 1) / step * step;
}

size_t AccountingAllocator::cached_bytes() const {
  std::lock_guard<SpinMutex> lock(mu_);
  return cached_bytes_ + cached_large_bytes_;
}

void AccountingAllocator::ReleaseCached() {
  std::vector<LargeBlock> blocks;  // (bytes, ptr), freed without the lock
  {
    std::lock_guard<SpinMutex> lock(mu_);
    for (int cls = 0; cls < kClasses; ++cls) {
      for (void* p : free_[cls]) blocks.push_back({ClassBytes(cls), p});
      free_[cls].clear();
    }
    blocks.insert(blocks.end(), large_free_.begin(), large_free_.end());
    large_free_.clear();
    large_by_class_.clear();
    cached_bytes_ = cached_large_bytes_ = 0;
  }
  for (const LargeBlock& b : blocks) ir::FreeStorage(b.ptr, b.bytes);
}

void* AccountingAllocator::Allocate(size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  if (!kDeviceReusesBlocks) {
    p = ir::HostAllocator()->Allocate(bytes);
  } else if (bytes <= kMaxCachedBlock) {
    const int cls = ClassOf(bytes);
    {
      std::lock_guard<SpinMutex> lock(mu_);
      if (!free_[cls].empty()) {
        p = free_[cls].back();
        free_[cls].pop_back();
        cached_bytes_ -= ClassBytes(cls);
      }
    }
    if (p == nullptr) p = ir::AllocateStorage(ClassBytes(cls));
  } else {
    p = AllocateLarge(bytes);
  }
  const int64_t now = current_.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void* AccountingAllocator::AllocateLarge(size_t bytes) {
  const size_t block = LargeClassBytes(bytes);
  {
    std::lock_guard<SpinMutex> lock(mu_);
    // The most recently kept block of the class.
    auto found = large_by_class_.find(block);
    if (found != large_by_class_.end()) {
      const LargeList::iterator it = found->second.back();
      found->second.pop_back();
      if (found->second.empty()) large_by_class_.erase(found);
      void* p = it->ptr;
      large_free_.erase(it);
      cached_large_bytes_ -= block;
      return p;
    }
  }
  return ir::AllocateStorage(block);
}

void AccountingAllocator::Deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  current_.fetch_sub(static_cast<int64_t>(bytes));
  if (!kDeviceReusesBlocks) {
    ir::HostAllocator()->Deallocate(ptr, bytes);
    return;
  }
  if (bytes > kMaxCachedBlock) return DeallocateLarge(ptr, bytes);
  const int cls = ClassOf(bytes);
  {
    std::lock_guard<SpinMutex> lock(mu_);
    if (cached_bytes_ + ClassBytes(cls) <= kMaxCachedBytes) {
      free_[cls].push_back(ptr);
      cached_bytes_ += ClassBytes(cls);
      return;
    }
  }
  ir::FreeStorage(ptr, ClassBytes(cls));
}

void AccountingAllocator::DeallocateLarge(void* ptr, size_t bytes) {
  const size_t block = LargeClassBytes(bytes);
  std::vector<LargeBlock> evicted;  // freed without the lock
  {
    std::lock_guard<SpinMutex> lock(mu_);
    // Twice the peak (and the eighth a block may exceed its request by): a step's blocks of
    // different classes are live at different times, so together they can pass the peak.
    const auto peak = static_cast<size_t>(std::max<int64_t>(peak_.load(), 0));
    const size_t bound = 2 * peak + peak / 8;
    if (block <= bound) {
      // The blocks kept longest go first: they serve sizes the program no longer asks for.
      while (cached_large_bytes_ + block > bound) {
        const LargeList::iterator oldest = large_free_.begin();
        auto cls = large_by_class_.find(oldest->bytes);
        // The class's oldest block is its first.
        cls->second.erase(cls->second.begin());
        if (cls->second.empty()) large_by_class_.erase(cls);
        evicted.push_back(*oldest);
        cached_large_bytes_ -= oldest->bytes;
        large_free_.erase(oldest);
      }
      large_by_class_[block].push_back(large_free_.insert(large_free_.end(), {block, ptr}));
      cached_large_bytes_ += block;
      ptr = nullptr;
    }
  }
  for (const LargeBlock& b : evicted) ir::FreeStorage(b.ptr, b.bytes);
  ir::FreeStorage(ptr, block);
}

}  // namespace shardjit::runtime
