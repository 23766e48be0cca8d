#include "base/thread_pool.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace shardjit::base {
namespace {

// Every task runs exactly once, whatever the task count and helper limit.
TEST(ThreadPoolTest, RunsEveryTaskOnce) {
  for (int pool_helpers : {0, 1, 3}) {
    ThreadPool pool(pool_helpers);
    for (int n : {0, 1, 2, 3, 7, 64, 1000}) {
      for (int max_helpers : {0, 1, 2, 8}) {
        std::vector<std::atomic<int>> runs(n);
        pool.ParallelFor(n, max_helpers, [&](int i) { runs[i].fetch_add(1); });
        for (int i = 0; i < n; ++i) {
          ASSERT_EQ(runs[i].load(), 1) << "task " << i << " of " << n << ", pool " << pool_helpers
                                       << ", max_helpers " << max_helpers;
        }
      }
    }
  }
}

// Two tasks that each wait for the other to start can only finish if a helper runs one of them.
TEST(ThreadPoolTest, HelpersRunTasksConcurrently) {
  ThreadPool pool(1);
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> started{0};
    std::atomic<bool> overlapped{true};
    pool.ParallelFor(2, 1, [&](int) {
      started.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (started.load() < 2) {
        if (std::chrono::steady_clock::now() > deadline) {
          overlapped = false;
          return;
        }
        std::this_thread::yield();
      }
    });
    ASSERT_TRUE(overlapped) << "round " << round;
  }
}

// With max_helpers 0 everything runs on the calling thread.
TEST(ThreadPoolTest, ZeroHelpersRunsOnCaller) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> elsewhere{false};
  pool.ParallelFor(50, 0, [&](int) {
    if (std::this_thread::get_id() != caller) elsewhere = true;
  });
  EXPECT_FALSE(elsewhere);
}

// Several threads share one pool without losing or repeating tasks.
TEST(ThreadPoolTest, ConcurrentCallers) {
  ThreadPool pool(2);
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 200; ++round) {
        pool.ParallelFor(5 + c, 2, [&](int i) { total.fetch_add(i + 1); });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  int64_t expected = 0;
  for (int c = 0; c < 4; ++c) expected += 200 * (5 + c) * (6 + c) / 2;
  EXPECT_EQ(total.load(), expected);
}

TEST(ParallelismTest, AvailableIsCappedByThePool) {
  ThreadPool pool(1);
  EXPECT_EQ((Parallelism{nullptr, 4}.available()), 1);
  EXPECT_EQ((Parallelism{&pool, 4}.available()), 2);
  EXPECT_EQ((Parallelism{&pool, 1}.available()), 1);
  EXPECT_EQ((Parallelism{&pool, 0}.available()), 1);
}

TEST(ParallelismTest, ScopeSetsAndRestoresTheCurrentParallelism) {
  ThreadPool pool(1);
  EXPECT_EQ(CurrentParallelism().pool, nullptr);
  {
    ScopedParallelism scope({&pool, 2});
    EXPECT_EQ(CurrentParallelism().pool, &pool);
    EXPECT_EQ(CurrentParallelism().threads, 2);
    std::set<int> seen;
    std::mutex mu;
    CurrentParallelism().ParallelFor(6, [&](int i) {
      std::lock_guard<std::mutex> lock(mu);
      seen.insert(i);
    });
    EXPECT_EQ(seen.size(), 6u);
  }
  EXPECT_EQ(CurrentParallelism().pool, nullptr);
  EXPECT_EQ(CurrentParallelism().threads, 1);
}

TEST(AvailableCoresTest, AtLeastOne) { EXPECT_GE(AvailableCores(), 1); }

}  // namespace
}  // namespace shardjit::base
