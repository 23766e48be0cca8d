// At most N devices compute at once. A device takes a core before it runs its program and gives
// it back while it waits at a collective. With more devices than cores, devices then take turns
// (first come, first served) instead of being time-sliced by the OS, which would interleave their
// kernels and evict their caches every few milliseconds.
#ifndef SHARDJIT_RUNTIME_CORE_SEMAPHORE_H_
#define SHARDJIT_RUNTIME_CORE_SEMAPHORE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>

namespace shardjit::runtime {

class CoreSemaphore {
 public:
  // `cores` >= 1 cores to share.
  explicit CoreSemaphore(int cores) : cores_(cores), free_(cores) {}

  int cores() const { return cores_; }

  // Blocks until a core is free and every earlier caller has been served, and takes it. Returns
  // false without a core once `*cancelled` is set (callers set it, then call Interrupt()).
  bool Acquire(const std::atomic<bool>* cancelled = nullptr);
  void Release();
  // Wakes every waiter to look at its cancellation flag.
  void Interrupt();
  // How many times a core was handed out: grows while devices make progress.
  uint64_t grants() const { return grants_.load(std::memory_order_relaxed); }

 private:
  struct Waiter {
    uint64_t ticket;
    std::condition_variable* cv;
  };
  // Wakes the first waiter (only it may take a free core: no herd of sleepers woken per core).
  void WakeFirst();

  const int cores_;
  std::mutex mu_;
  int free_;
  uint64_t next_ticket_ = 0;
  std::deque<Waiter> waiting_;  // in arrival order
  std::atomic<uint64_t> grants_{0};
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_CORE_SEMAPHORE_H_
