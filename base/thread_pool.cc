#include "base/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

namespace shardjit::base {
namespace {

// How long a helper keeps polling for work after a task before it sleeps.
constexpr std::chrono::microseconds kSpinTime(20);

void CpuRelax() { __builtin_ia32_pause(); }

}  // namespace

struct ThreadPool::Batch {
  absl::FunctionRef<void(int)> task;
  int n;
  std::atomic<int> next{0};     // the next unclaimed task
  std::atomic<int> helpers{0};  // helpers that took an entry of this batch and are not done
};

ThreadPool::ThreadPool(int num_helpers) {
  for (int i = 0; i < num_helpers; ++i) helpers_.emplace_back([this] { HelperLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

void ThreadPool::Drain(Batch& batch) {
  for (int i = batch.next.fetch_add(1); i < batch.n; i = batch.next.fetch_add(1)) batch.task(i);
}

void ThreadPool::ParallelFor(int n, int max_helpers, absl::FunctionRef<void(int)> task) {
  const int helpers = std::min({max_helpers, num_helpers(), n - 1});
  if (helpers <= 0) {
    for (int i = 0; i < n; ++i) task(i);
    return;
  }
  Batch batch{task, n};
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < helpers; ++i) queue_.push_back(&batch);
    queued_.fetch_add(helpers);
    for (int i = 0; i < std::min(helpers, sleeping_); ++i) wake_.notify_one();
  }
  Drain(batch);
  // Entries no helper took are withdrawn; then only helpers already inside can touch `batch`.
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto end = std::remove(queue_.begin(), queue_.end(), &batch);
    queued_.fetch_sub(queue_.end() - end);
    queue_.erase(end, queue_.end());
  }
  // They are running tasks already claimed: a short wait, spent spinning (then yielding).
  for (int spins = 0; batch.helpers.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 256) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::HelperLoop() {
  for (;;) {
    const auto spin_until = std::chrono::steady_clock::now() + kSpinTime;
    while (queued_.load(std::memory_order_relaxed) == 0 &&
           std::chrono::steady_clock::now() < spin_until) {
      CpuRelax();
    }
    Batch* batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++sleeping_;
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      --sleeping_;
      if (queue_.empty()) return;  // stopping
      batch = queue_.front();
      queue_.pop_front();
      queued_.fetch_sub(1);
      batch->helpers.fetch_add(1);
    }
    Drain(*batch);
    batch->helpers.fetch_sub(1, std::memory_order_release);  // the last touch of `batch`
  }
}

int Parallelism::available() const {
  return pool == nullptr ? 1 : std::max(1, std::min(threads, pool->num_helpers() + 1));
}

void Parallelism::ParallelFor(int n, absl::FunctionRef<void(int)> task) const {
  if (pool == nullptr) {
    for (int i = 0; i < n; ++i) task(i);
    return;
  }
  pool->ParallelFor(n, available() - 1, task);
}

Parallelism& CurrentParallelism() {
  static thread_local Parallelism parallelism;
  return parallelism;
}

int AvailableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace shardjit::base
