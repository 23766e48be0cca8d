#include "runtime/scheduler.h"

#include <immintrin.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace shardjit::runtime {
namespace {

thread_local Scheduler::Task* current_task = nullptr;

}  // namespace

struct Scheduler::Thread {
  Scheduler* scheduler = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  Task* head = nullptr;  // ready tasks, first in first out; under mu
  Task* tail = nullptr;
  std::atomic<int> ready{0};  // length of the ready list, for spinning without mu
  bool sleeping = false;      // under mu
  bool stop = false;          // under mu
  std::atomic<bool> interrupted{false};
  ExecutionContext context;   // the thread's own stack, while a task runs
  std::thread thread;

  // Appends `task` to the ready list; under mu.
  void Push(Task* task) {
    task->next_ = nullptr;
    (tail != nullptr ? tail->next_ : head) = task;
    tail = task;
    ready.fetch_add(1, std::memory_order_release);
    if (sleeping) cv.notify_one();
  }
  // The next ready task (now running); null once stopped or interrupted with nothing ready.
  Task* Next() {
    const auto spin_until = std::chrono::steady_clock::now() + scheduler->idle_spin_;
    for (int i = 0; scheduler->idle_spin_.count() > 0 &&
                    ready.load(std::memory_order_acquire) == 0 &&
                    !interrupted.load(std::memory_order_relaxed);
         ++i) {
      if (i % 64 == 63 && std::chrono::steady_clock::now() > spin_until) break;
      _mm_pause();
    }
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      if (Task* task = head; task != nullptr) {
        head = task->next_;
        if (head == nullptr) tail = nullptr;
        ready.fetch_sub(1, std::memory_order_relaxed);
        task->state_ = Task::State::kRunning;
        return task;
      }
      if (stop || interrupted.exchange(false)) return nullptr;
      sleeping = true;
      cv.wait(lock);
      sleeping = false;
    }
  }
};

Scheduler::Task::~Task() = default;

void Scheduler::Task::Body(void* arg) {
  Task* task = static_cast<Task*>(arg);
  task->body_(task->arg_);
  task->finished_ = true;
}

Scheduler::Scheduler(int num_threads, std::chrono::microseconds idle_spin)
    : idle_spin_(idle_spin) {
  for (int i = 0; i < std::max(1, num_threads); ++i) {
    threads_.push_back(std::make_unique<Thread>());
    threads_.back()->scheduler = this;
  }
  for (size_t i = 1; i < threads_.size(); ++i) {
    threads_[i]->thread = std::thread([this, t = threads_[i].get()] { Loop(*t); });
  }
}

Scheduler::~Scheduler() {
  for (auto& t : threads_) {
    std::lock_guard<std::mutex> lock(t->mu);
    t->stop = true;
    t->cv.notify_one();
  }
  for (auto& t : threads_) {
    if (t->thread.joinable()) t->thread.join();
  }
}

void Scheduler::Drive(absl::FunctionRef<bool()> finished) {
  Thread& t = *threads_[0];
  // Thread 0 is whichever thread calls Drive: the sanitizers learn its stack anew.
  t.context = ExecutionContext{};
  while (!finished()) {
    if (Task* task = t.Next()) Resume(t, task);
  }
}

void Scheduler::Interrupt(int thread) {
  Thread& t = *threads_[thread % threads_.size()];
  std::lock_guard<std::mutex> lock(t.mu);
  t.interrupted = true;
  if (t.sleeping) t.cv.notify_one();
}

bool Scheduler::sleeping(int thread) const {
  Thread& t = *threads_[thread % threads_.size()];
  std::lock_guard<std::mutex> lock(t.mu);
  return t.sleeping;
}

void Scheduler::Start(Task& task, int thread, Fn body, Fn exited, void* arg) {
  Thread& t = *threads_[thread % threads_.size()];
  {
    // Before anything touches the task's stack, which a running task may be on.
    std::lock_guard<std::mutex> lock(task.thread_ != nullptr ? task.thread_->mu : t.mu);
    if (task.state_ != Task::State::kIdle) {
      std::fprintf(stderr, "shardjit: Scheduler::Start on a task that has not finished\n");
      std::abort();
    }
  }
  if (task.fiber_ == nullptr) task.fiber_ = std::make_unique<Fiber>();
  task.body_ = body;
  task.exited_ = exited;
  task.arg_ = arg;
  task.finished_ = false;
  task.parallelism_ = base::Parallelism{};
  task.span_recorder_ = nullptr;
  task.fiber_->Prepare(&Task::Body, &task, &t.context);
  std::lock_guard<std::mutex> lock(t.mu);
  task.thread_ = &t;
  task.wake_pending_ = false;
  task.state_ = Task::State::kReady;
  t.Push(&task);
}

Scheduler::Task* Scheduler::Current() { return current_task; }

bool Scheduler::Suspend(void (*unlock)(void*), void* lock) {
  Task* task = current_task;
  if (task == nullptr) {
    std::fprintf(stderr, "shardjit: Scheduler::Park outside a task\n");
    std::abort();
  }
  Thread& t = *task->thread_;
  {
    std::lock_guard<std::mutex> guard(t.mu);
    if (std::exchange(task->wake_pending_, false)) return false;
    task->state_ = Task::State::kParked;
  }
  // A Wake from now on makes the task ready; only this thread resumes it, after the switch.
  unlock(lock);
  SwitchContext(task->fiber_->context(), t.context);
  return true;
}

void Scheduler::Wake(Task& task) {
  Thread* t = task.thread_;
  if (t == nullptr) return;
  std::lock_guard<std::mutex> lock(t->mu);
  if (task.state_ == Task::State::kParked) {
    task.state_ = Task::State::kReady;
    t->Push(&task);
  } else if (task.state_ == Task::State::kRunning) {
    task.wake_pending_ = true;
  }
}

void Scheduler::Loop(Thread& t) {
  for (;;) {
    Task* task = t.Next();
    if (task != nullptr) {
      Resume(t, task);
      continue;
    }
    std::lock_guard<std::mutex> lock(t.mu);
    if (t.stop && t.head == nullptr) return;
  }
}

void Scheduler::Resume(Thread& t, Task* task) {
  // The thread's own thread-local state is set aside while the task's is in place.
  const base::Parallelism parallelism = base::CurrentParallelism();
  base::SpanRecorder* const recorder = base::ThreadSpanRecorder();
  base::CurrentParallelism() = task->parallelism_;
  base::ThreadSpanRecorder() = task->span_recorder_;
  current_task = task;
  SwitchContext(t.context, task->fiber_->context());
  current_task = nullptr;
  task->parallelism_ = base::CurrentParallelism();
  task->span_recorder_ = base::ThreadSpanRecorder();
  base::CurrentParallelism() = parallelism;
  base::ThreadSpanRecorder() = recorder;
  progress_.fetch_add(1, std::memory_order_relaxed);
  if (task->finished_) {
    {
      std::lock_guard<std::mutex> lock(t.mu);
      task->state_ = Task::State::kIdle;
    }
    task->exited_(task->arg_);
  }
}

}  // namespace shardjit::runtime
