// Runs the devices of a run as tasks (fibers, runtime/fiber.h) on a fixed set of threads, one per
// core the runtime may use: thread 0 is whichever thread drives the run (Drive), the others are
// the scheduler's own. A task runs until it finishes or parks (waits at a collective); its
// thread then resumes the next ready task, a switch of stacks rather than an OS context switch.
// Devices that outnumber the threads thus take turns without the OS time-slicing them, and a
// collective among devices sharing a thread costs function calls.
//
// Each task stays on the thread it was started on until it finishes. The thread-local state of
// programs (the kernel parallelism and the span recorder, backends/) travels with the task.
// A thread with nothing ready spins briefly (waking a sleeping thread costs ~27 us here), then
// sleeps until a task of its own is woken or started.
#ifndef SHARDJIT_RUNTIME_SCHEDULER_H_
#define SHARDJIT_RUNTIME_SCHEDULER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/functional/function_ref.h"
#include "base/span.h"
#include "base/thread_pool.h"
#include "runtime/fiber.h"

namespace shardjit::runtime {

class Scheduler {
 public:
  class Task;
  using Fn = void (*)(void* arg);

  // How long an idle thread polls its ready list before it sleeps by default: about twice what
  // waking a sleeping thread on another core costs, so that a wake-up from there arrives while it
  // still polls.
  static constexpr std::chrono::microseconds kDefaultIdleSpin{50};

  // Serves `num_threads` >= 1 threads: starts num_threads - 1 (thread 0 is the caller of Drive).
  // An idle thread polls for `idle_spin` before it sleeps.
  explicit Scheduler(int num_threads, std::chrono::microseconds idle_spin = kDefaultIdleSpin);
  // Joins the threads; every task must have finished.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  int num_threads() const { return static_cast<int>(threads_.size()); }

  // Runs `body(arg)` as `task` (not running) on thread `thread`. Once body has returned and the
  // task is off its stack, `exited(arg)` runs on that thread; from then on the task may be
  // started again. A task is destroyed only after the scheduler (its threads joined): the thread
  // that last ran its fiber may still be finishing the switch away from it.
  void Start(Task& task, int thread, Fn body, Fn exited, void* arg);

  // Runs thread 0's tasks on the calling thread until `finished()`, which is checked whenever
  // the thread has nothing to run and after Interrupt(0). One caller at a time.
  void Drive(absl::FunctionRef<bool()> finished);
  // Makes thread `thread` look at its Drive condition (no-op for the scheduler's own threads).
  void Interrupt(int thread);

  // The task running on the calling thread; null outside tasks.
  static Task* Current();
  // Suspends the current task until someone calls Wake on it; `lock` (a std::unique_lock) is
  // released meanwhile and held again on return. May return without a Wake: callers re-check
  // what they wait for.
  template <typename Lock>
  static void Park(Lock& lock) {
    if (Suspend([](void* l) { static_cast<Lock*>(l)->unlock(); }, &lock)) lock.lock();
  }
  // Makes `task` ready if it is parked; if it is running, its next Park returns at once.
  static void Wake(Task& task);

  // Times a task was resumed or finished: grows while tasks make progress.
  uint64_t progress() const { return progress_.load(std::memory_order_relaxed); }

  // Whether thread `thread` is asleep for want of a ready task (its idle spin over): for tests
  // that must wake a task whose thread sleeps, instead of sleeping until it probably does.
  bool sleeping(int thread) const;

 private:
  struct Thread;
  // Parks the current task after calling unlock(lock); false (nothing unlocked) if a Wake came
  // first.
  static bool Suspend(void (*unlock)(void*), void* lock);
  void Loop(Thread& thread);
  // Runs `task` on `thread` until it parks or finishes.
  void Resume(Thread& thread, Task* task);

  const std::chrono::microseconds idle_spin_;
  std::vector<std::unique_ptr<Thread>> threads_;
  std::atomic<uint64_t> progress_{0};
};

// A resumable unit of work with its own stack (created at its first start, reused after).
class Scheduler::Task {
 public:
  Task() = default;
  ~Task();
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;

 private:
  friend class Scheduler;
  enum class State { kIdle, kReady, kRunning, kParked };
  static void Body(void* task);

  std::unique_ptr<Fiber> fiber_;
  Thread* thread_ = nullptr;     // set by Start
  State state_ = State::kIdle;   // under thread_->mu
  bool wake_pending_ = false;    // under thread_->mu
  bool finished_ = false;        // touched by the task and its thread only
  Task* next_ = nullptr;         // in thread_'s ready list
  Fn body_ = nullptr;
  Fn exited_ = nullptr;
  void* arg_ = nullptr;
  // The thread-local state of the program, swapped in and out with the task.
  base::Parallelism parallelism_;
  base::SpanRecorder* span_recorder_ = nullptr;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_SCHEDULER_H_
