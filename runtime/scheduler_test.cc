#include "runtime/scheduler.h"

#include <xmmintrin.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/fiber.h"
#include "runtime/spin_mutex.h"

namespace shardjit::runtime {
namespace {

// A fiber that counts up, switching back to the thread after each step.
struct Counter {
  ExecutionContext* thread = nullptr;
  Fiber fiber{64 << 10};
  int value = 0;
  static void Body(void* arg) {
    auto* self = static_cast<Counter*>(arg);
    for (int i = 0; i < 3; ++i) {
      ++self->value;
      SwitchContext(self->fiber.context(), *self->thread);
    }
  }
};

TEST(Fiber, SwitchesBackAndForthAndRunsToTheEnd) {
  ExecutionContext thread;
  Counter counter;
  counter.thread = &thread;
  for (int round = 0; round < 2; ++round) {  // a prepared fiber runs again from the top
    counter.value = 0;
    counter.fiber.Prepare(&Counter::Body, &counter, &thread);
    for (int i = 1; i <= 3; ++i) {
      SwitchContext(thread, counter.fiber.context());
      EXPECT_EQ(counter.value, i);
    }
    SwitchContext(thread, counter.fiber.context());  // body returns: back for good
    EXPECT_EQ(counter.value, 3);
  }
}

// Sets MXCSR's rounding mode on the fiber: the thread's own stays as it was.
struct RoundingFiber {
  ExecutionContext* thread = nullptr;
  Fiber fiber{64 << 10};
  unsigned seen_on_fiber = 0;
  static void Body(void* arg) {
    auto* self = static_cast<RoundingFiber*>(arg);
    _MM_SET_ROUNDING_MODE(_MM_ROUND_TOWARD_ZERO);
    SwitchContext(self->fiber.context(), *self->thread);
    self->seen_on_fiber = _MM_GET_ROUNDING_MODE();
  }
};

TEST(Fiber, FloatingPointControlIsPerContext) {
  ExecutionContext thread;
  RoundingFiber f;
  f.thread = &thread;
  const unsigned before = _MM_GET_ROUNDING_MODE();
  f.fiber.Prepare(&RoundingFiber::Body, &f, &thread);
  SwitchContext(thread, f.fiber.context());
  EXPECT_EQ(_MM_GET_ROUNDING_MODE(), before);
  SwitchContext(thread, f.fiber.context());
  EXPECT_EQ(f.seen_on_fiber, static_cast<unsigned>(_MM_ROUND_TOWARD_ZERO));
  EXPECT_EQ(_MM_GET_ROUNDING_MODE(), before);
}

// Tasks that pass a token around a ring: task i waits until the token is i, then hands it to
// i + 1. Every hand-over parks one task and wakes another, across threads or on one.
struct Ring {
  explicit Ring(int n) : tasks(n) {
    for (auto& t : tasks) t = std::make_unique<Scheduler::Task>();
  }
  struct Member {
    Ring* ring;
    int index;
  };
  static void Body(void* arg) {
    auto* m = static_cast<Member*>(arg);
    Ring& r = *m->ring;
    const int n = static_cast<int>(r.tasks.size());
    for (int lap = 0; lap < r.laps; ++lap) {
      std::unique_lock<SpinMutex> lock(r.mu);
      while (r.token != lap * n + m->index) Scheduler::Park(lock);
      ++r.token;
      r.threads_seen[m->index].insert(std::this_thread::get_id());
      Scheduler::Wake(*r.tasks[(m->index + 1) % n]);
    }
  }
  static void Exited(void* arg) {
    Ring& r = *static_cast<Member*>(arg)->ring;
    Scheduler* scheduler = r.scheduler;  // `r` may be gone once the last task is counted
    if (r.finished.fetch_add(1) + 1 == static_cast<int>(r.tasks.size())) scheduler->Interrupt(0);
  }

  int laps = 50;
  Scheduler* scheduler = nullptr;
  SpinMutex mu;
  int token = 0;
  std::vector<std::unique_ptr<Scheduler::Task>> tasks;
  std::vector<std::set<std::thread::id>> threads_seen;
  std::atomic<int> finished{0};
};

void RunRing(Scheduler& scheduler, Ring& ring) {
  const int n = static_cast<int>(ring.tasks.size());
  ring.scheduler = &scheduler;
  ring.token = 0;
  ring.finished = 0;
  ring.threads_seen.assign(n, {});
  std::vector<Ring::Member> members;
  for (int i = 0; i < n; ++i) members.push_back({&ring, i});
  for (int i = 0; i < n; ++i) {
    scheduler.Start(*ring.tasks[i], i % scheduler.num_threads(), &Ring::Body, &Ring::Exited,
                    &members[i]);
  }
  scheduler.Drive([&] { return ring.finished.load() == n; });
}

TEST(Scheduler, TasksParkAndWakeAcrossAndWithinThreads) {
  // Idle threads that poll for a while, and ones that sleep at once (every hand-over across
  // threads then wakes a sleeping one).
  for (auto idle_spin : {Scheduler::kDefaultIdleSpin, std::chrono::microseconds(0)}) {
    for (int threads : {1, 2, 3}) {
      for (int n : {1, 2, 16, 64}) {
        Scheduler scheduler(threads, idle_spin);
        Ring ring(n);
        for (int run = 0; run < 3; ++run) {  // tasks are started again once they finished
          RunRing(scheduler, ring);
          EXPECT_EQ(ring.token, ring.laps * n) << threads << " threads, " << n << " tasks, idle "
                                               << idle_spin.count() << " us";
          for (int i = 0; i < n; ++i) {
            // A task stays on the thread it was started on.
            EXPECT_EQ(ring.threads_seen[i].size(), 1u) << "task " << i;
          }
        }
      }
    }
  }
}

TEST(Scheduler, AWakeBeforeTheParkIsNotLost) {
  Scheduler scheduler(1);
  struct State {
    Scheduler::Task task;
    std::atomic<bool> done{false};
    int parks_returned = 0;
  } state;
  auto body = [](void* arg) {
    auto* s = static_cast<State*>(arg);
    Scheduler::Wake(*Scheduler::Current());  // running: the next Park returns at once
    SpinMutex mu;
    std::unique_lock<SpinMutex> lock(mu);
    Scheduler::Park(lock);
    EXPECT_TRUE(lock.owns_lock());
    ++s->parks_returned;
  };
  auto exited = [](void* arg) { static_cast<State*>(arg)->done = true; };
  scheduler.Start(state.task, 0, body, exited, &state);
  scheduler.Drive([&] { return state.done.load(); });
  EXPECT_EQ(state.parks_returned, 1);
}

TEST(Scheduler, ThreadLocalParallelismTravelsWithTheTask) {
  // Two tasks on one thread each set their own parallelism, then park and resume in turn.
  Scheduler scheduler(1);
  struct State {
    Scheduler::Task tasks[2];
    SpinMutex mu;
    int turn = 0;
    int seen[2] = {0, 0};
    std::atomic<int> finished{0};
  } state;
  struct Arg {
    State* state;
    int index;
  } args[2] = {{&state, 0}, {&state, 1}};
  auto body = [](void* p) {
    auto* a = static_cast<Arg*>(p);
    State& s = *a->state;
    base::CurrentParallelism().threads = 10 + a->index;
    for (int step = 0; step < 4; ++step) {
      std::unique_lock<SpinMutex> lock(s.mu);
      while (s.turn % 2 != a->index) Scheduler::Park(lock);
      ++s.turn;
      Scheduler::Wake(s.tasks[1 - a->index]);
    }
    s.seen[a->index] = base::CurrentParallelism().threads;
  };
  auto exited = [](void* p) { static_cast<Arg*>(p)->state->finished.fetch_add(1); };
  const int before = base::CurrentParallelism().threads;
  for (int i = 0; i < 2; ++i) scheduler.Start(state.tasks[i], 0, body, exited, &args[i]);
  scheduler.Drive([&] { return state.finished.load() == 2; });
  EXPECT_EQ(state.seen[0], 10);
  EXPECT_EQ(state.seen[1], 11);
  EXPECT_EQ(base::CurrentParallelism().threads, before);  // the driver's own
}

// Thread 0 is whichever thread calls Drive: runs driven from different threads in turn.
TEST(Scheduler, EachRunMayBeDrivenFromAnotherThread) {
  Scheduler scheduler(2);
  Ring ring(8);
  RunRing(scheduler, ring);
  for (int i = 0; i < 3; ++i) {
    std::thread driver([&] { RunRing(scheduler, ring); });
    driver.join();
    EXPECT_EQ(ring.token, ring.laps * 8);
  }
  RunRing(scheduler, ring);
  EXPECT_EQ(ring.token, ring.laps * 8);
}

// A task parked on a scheduler thread that has gone to sleep (nothing else to run) resumes when
// a thread outside the scheduler wakes it, as the watchdog does.
TEST(Scheduler, ATaskWokenFromOutsideTheSchedulerResumes) {
  // Declared before the scheduler, so that the task outlives the scheduler's threads: its fiber
  // is freed only once they are joined.
  struct State {
    Scheduler::Task task;
    SpinMutex mu;
    bool released = false;
    std::atomic<bool> parked{false};
    absl::Notification done;
  } state;
  Scheduler scheduler(2);
  auto body = [](void* p) {
    auto* s = static_cast<State*>(p);
    std::unique_lock<SpinMutex> lock(s->mu);
    s->parked = true;
    while (!s->released) Scheduler::Park(lock);
  };
  auto exited = [](void* p) { static_cast<State*>(p)->done.Notify(); };
  scheduler.Start(state.task, 1, body, exited, &state);
  std::atomic<bool> saw_sleeping{false};
  std::thread releaser([&] {  // as a watchdog would
    // Once the task has parked, thread 1 has nothing to run: wait until it sleeps.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!(state.parked.load() && scheduler.sleeping(1)) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    saw_sleeping = state.parked.load() && scheduler.sleeping(1);
    std::lock_guard<SpinMutex> lock(state.mu);
    state.released = true;
    Scheduler::Wake(state.task);
  });
  const bool done = state.done.WaitForNotificationWithTimeout(absl::Seconds(30));
  releaser.join();
  EXPECT_TRUE(saw_sleeping) << "thread 1 did not go to sleep within 30 s of the task parking";
  ASSERT_TRUE(done) << "the task did not finish within 30 s of its wake-up";
  EXPECT_TRUE(state.released);
}

}  // namespace
}  // namespace shardjit::runtime
