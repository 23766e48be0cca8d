#include "runtime/core_semaphore.h"

#include <algorithm>

namespace shardjit::runtime {

void CoreSemaphore::WakeFirst() {
  if (!waiting_.empty() && free_ > 0) waiting_.front().cv->notify_one();
}

bool CoreSemaphore::Acquire(const std::atomic<bool>* cancelled) {
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = next_ticket_++;
  waiting_.push_back({ticket, &cv});
  auto served = [&] { return waiting_.front().ticket == ticket && free_ > 0; };
  auto given_up = [&] { return cancelled != nullptr && cancelled->load(); };
  cv.wait(lock, [&] { return served() || given_up(); });
  const bool got = served();
  waiting_.erase(std::find_if(waiting_.begin(), waiting_.end(),
                              [&](const Waiter& w) { return w.ticket == ticket; }));
  if (got) {
    --free_;
    grants_.fetch_add(1, std::memory_order_relaxed);
  }
  WakeFirst();  // the next ticket may proceed if another core is free
  return got;
}

void CoreSemaphore::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  ++free_;
  WakeFirst();
}

void CoreSemaphore::Interrupt() {
  // Under the lock: a waiter either sees the flag when it next checks, or is already waiting.
  std::lock_guard<std::mutex> lock(mu_);
  for (const Waiter& w : waiting_) w.cv->notify_one();
}

}  // namespace shardjit::runtime
