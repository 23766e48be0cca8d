#include "runtime/core_semaphore.h"

namespace shardjit::runtime {

void CoreSemaphore::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = next_ticket_++;
  cv_.wait(lock, [&] { return ticket == serving_ && free_ > 0; });
  --free_;
  ++serving_;
  lock.unlock();
  cv_.notify_all();  // the next ticket may proceed if another core is free
}

void CoreSemaphore::Release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++free_;
  }
  cv_.notify_all();
}

}  // namespace shardjit::runtime
