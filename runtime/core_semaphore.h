// At most N devices compute at once. A device takes a core before it runs its program and gives
// it back while it waits at a collective. With more devices than cores, devices then take turns
// (first come, first served) instead of being time-sliced by the OS, which would interleave their
// kernels and evict their caches every few milliseconds.
#ifndef SHARDJIT_RUNTIME_CORE_SEMAPHORE_H_
#define SHARDJIT_RUNTIME_CORE_SEMAPHORE_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace shardjit::runtime {

class CoreSemaphore {
 public:
  // `cores` >= 1 cores to share.
  explicit CoreSemaphore(int cores) : free_(cores) {}

  // Blocks until a core is free and no earlier caller is still waiting for one.
  void Acquire();
  void Release();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
  uint64_t next_ticket_ = 0;  // handed to each caller of Acquire
  uint64_t serving_ = 0;      // the lowest ticket not yet served
};

// Holds a core of `cores` (if not null) for a scope.
class CoreHold {
 public:
  explicit CoreHold(CoreSemaphore* cores) : cores_(cores) {
    if (cores_ != nullptr) cores_->Acquire();
  }
  ~CoreHold() {
    if (cores_ != nullptr) cores_->Release();
  }
  CoreHold(const CoreHold&) = delete;
  CoreHold& operator=(const CoreHold&) = delete;

 private:
  CoreSemaphore* cores_;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_CORE_SEMAPHORE_H_
