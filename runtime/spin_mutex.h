// A mutex for critical sections of a few hundred nanoseconds shared by the runtime's threads (one
// per core): a contended lock spins with pause instead of sleeping in the kernel (a futex wait and
// wake cost microseconds), and yields the core after a while in case its holder was preempted.
#ifndef SHARDJIT_RUNTIME_SPIN_MUTEX_H_
#define SHARDJIT_RUNTIME_SPIN_MUTEX_H_

#include <immintrin.h>

#include <atomic>
#include <thread>

namespace shardjit::runtime {

class SpinMutex {
 public:
  void lock() {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire);) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < kSpinsBeforeYield) {
          _mm_pause();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  bool try_lock() {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSpinsBeforeYield = 2000;  // ~20-80 us of pause
  std::atomic<bool> locked_{false};
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_SPIN_MUTEX_H_
