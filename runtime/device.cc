#include "runtime/device.h"

namespace shardjit::runtime {

void* AccountingAllocator::Allocate(size_t bytes) {
  void* p = ir::HostAllocator()->Allocate(bytes);
  int64_t now = current_.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void AccountingAllocator::Deallocate(void* ptr, size_t bytes) {
  ir::HostAllocator()->Deallocate(ptr, bytes);
  current_.fetch_sub(static_cast<int64_t>(bytes));
}

}  // namespace shardjit::runtime
