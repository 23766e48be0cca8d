// Helper threads that one kernel call splits its work over (GEMM panels, for instance), and the
// share of them a running program may use.
//
// The runtime owns one pool per Runtime with (cores - 1) helpers and gives each device of a run
// cores / devices threads, the device's own thread included: with as many devices as cores or
// more, every device gets 1 and the helpers stay asleep, so nothing oversubscribes.
//
// Waking a sleeping thread across cores costs ~27 us here, spinning costs ~0.03 us but is
// catastrophic when threads outnumber cores. Helpers therefore spin (with pause) for a short while
// after each task and then block; the caller always works on its own tasks too, so a slow wake-up
// delays only the tasks no helper has claimed yet.
#ifndef SHARDJIT_BASE_THREAD_POOL_H_
#define SHARDJIT_BASE_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "base/stop_signal.h"

namespace shardjit::base {

class ThreadPool {
 public:
  // Starts `num_helpers` (>= 0) threads.
  explicit ThreadPool(int num_helpers);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_helpers() const { return static_cast<int>(helpers_.size()); }

  // Runs task(0) .. task(n - 1), each once, on the calling thread and at most `max_helpers`
  // helpers; returns when all have finished. Tasks no helper claims run on the caller, so this
  // never waits for a helper to become free. Safe to call from several threads at once.
  void ParallelFor(int n, int max_helpers, absl::FunctionRef<void(int)> task);

 private:
  struct Batch;
  void HelperLoop();
  // Runs unclaimed tasks of `batch` until none is left.
  static void Drain(Batch& batch);

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Batch*> queue_;  // one entry per helper asked for
  int sleeping_ = 0;
  bool stop_ = false;
  std::atomic<int64_t> queued_{0};  // queue_.size(), readable without the lock while spinning
  std::vector<std::thread> helpers_;
};

// The threads one kernel call may use: the calling thread plus helpers of `pool`, `threads` in
// all; and when it must stop.
struct Parallelism {
  ThreadPool* pool = nullptr;
  int threads = 1;
  StopSignal stop;

  // Threads actually available: `threads`, capped by the pool's size (1 without a pool).
  int available() const;
  // Runs task(0) .. task(n - 1) over the available threads; returns when all have finished.
  void ParallelFor(int n, absl::FunctionRef<void(int)> task) const;
};

// The parallelism of the program running on this thread. The runtime sets it for each device's
// program (kernels have no DeviceContext at hand); the default is the calling thread alone.
Parallelism& CurrentParallelism();

// Sets CurrentParallelism() for a scope.
class ScopedParallelism {
 public:
  explicit ScopedParallelism(Parallelism parallelism) : saved_(CurrentParallelism()) {
    CurrentParallelism() = parallelism;
  }
  ~ScopedParallelism() { CurrentParallelism() = saved_; }
  ScopedParallelism(const ScopedParallelism&) = delete;
  ScopedParallelism& operator=(const ScopedParallelism&) = delete;

 private:
  Parallelism saved_;
};

// Cores this process may run on (its CPU affinity mask), at least 1.
int AvailableCores();

}  // namespace shardjit::base

#endif  // SHARDJIT_BASE_THREAD_POOL_H_
