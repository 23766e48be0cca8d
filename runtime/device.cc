#include "runtime/device.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <mutex>

namespace shardjit::runtime {

AccountingAllocator::~AccountingAllocator() {
  for (std::vector<void*>& blocks : free_) {
    for (void* p : blocks) std::free(p);
  }
}

int AccountingAllocator::ClassOf(size_t bytes) {
  const size_t rounded = std::bit_ceil(std::max<size_t>(bytes, size_t{1} << kMinClassLog2));
  return std::countr_zero(rounded) - kMinClassLog2;
}

size_t AccountingAllocator::cached_bytes() const {
  std::lock_guard<SpinMutex> lock(mu_);
  return cached_bytes_;
}

void* AccountingAllocator::Allocate(size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  if (kDeviceReusesBlocks && bytes <= kMaxCachedBlock) {
    const int cls = ClassOf(bytes);
    {
      std::lock_guard<SpinMutex> lock(mu_);
      if (!free_[cls].empty()) {
        p = free_[cls].back();
        free_[cls].pop_back();
        cached_bytes_ -= ClassBytes(cls);
      }
    }
    if (p == nullptr) p = std::aligned_alloc(64, ClassBytes(cls));
  } else {
    p = ir::HostAllocator()->Allocate(bytes);
  }
  const int64_t now = current_.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void AccountingAllocator::Deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  current_.fetch_sub(static_cast<int64_t>(bytes));
  if (!kDeviceReusesBlocks || bytes > kMaxCachedBlock) {
    ir::HostAllocator()->Deallocate(ptr, bytes);
    return;
  }
  const int cls = ClassOf(bytes);
  {
    std::lock_guard<SpinMutex> lock(mu_);
    if (cached_bytes_ + ClassBytes(cls) <= kMaxCachedBytes) {
      free_[cls].push_back(ptr);
      cached_bytes_ += ClassBytes(cls);
      return;
    }
  }
  std::free(ptr);
}

}  // namespace shardjit::runtime
