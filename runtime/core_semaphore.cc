#include "runtime/core_semaphore.h"

#include <algorithm>

namespace shardjit::runtime {

bool CoreSemaphore::Acquire(const std::atomic<bool>* cancelled) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = next_ticket_++;
  waiting_.push_back(ticket);
  auto served = [&] { return waiting_.front() == ticket && free_ > 0; };
  auto given_up = [&] { return cancelled != nullptr && cancelled->load(); };
  cv_.wait(lock, [&] { return served() || given_up(); });
  const bool got = served();
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), ticket));
  if (got) {
    --free_;
    grants_.fetch_add(1, std::memory_order_relaxed);
  }
  lock.unlock();
  cv_.notify_all();  // the next ticket may proceed if another core is free
  return got;
}

void CoreSemaphore::Release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++free_;
  }
  cv_.notify_all();
}

void CoreSemaphore::Interrupt() {
  // Under the lock: a waiter either sees the flag when it next checks, or is already waiting.
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

}  // namespace shardjit::runtime
