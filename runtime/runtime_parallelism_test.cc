// The runtime's thread budget: a device's kernels may split over max(1, threads / devices in the
// run) threads (its worker and the runtime's helpers), never more, a global-view program on the
// calling thread gets them all, and at most `threads` devices compute at once.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "backends/executable.h"
#include "backends/thread_pool.h"
#include "gtest/gtest.h"
#include "runtime/core_semaphore.h"
#include "runtime/runtime.h"

namespace shardjit::runtime {
namespace {

// Records the parallelism it runs with, and which threads a parallel loop over it used.
class ProbeExecutable final : public backends::Executable {
 public:
  absl::StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>&,
                                              backends::DeviceContext&) const override {
    const backends::Parallelism p = backends::CurrentParallelism();
    std::set<std::thread::id> used;
    std::mutex mu;
    // Enough tasks that a helper, once awake, takes part; each task yields to let it.
    p.ParallelFor(64, [&](int) {
      std::this_thread::yield();
      std::lock_guard<std::mutex> lock(mu);
      used.insert(std::this_thread::get_id());
    });
    std::lock_guard<std::mutex> lock(mu_);
    available_.insert(p.available());
    max_threads_used_ = std::max<int>(max_threads_used_, static_cast<int>(used.size()));
    return std::vector<ir::Tensor>{};
  }
  std::string backend() const override { return "probe"; }

  std::set<int> available() const { return available_; }
  int max_threads_used() const { return max_threads_used_; }

 private:
  mutable std::mutex mu_;
  mutable std::set<int> available_;
  mutable int max_threads_used_ = 0;
};

ir::Mesh LineMesh(int n) {
  ir::Mesh mesh;
  ir::MeshAxis* axis = mesh.add_axes();
  axis->set_name("x");
  axis->set_size(n);
  return mesh;
}

absl::Status RunOn(Runtime& rt, int devices, const ProbeExecutable& probe) {
  std::vector<const backends::Executable*> programs(devices, &probe);
  return rt.RunSpmd(LineMesh(devices), programs, std::vector<std::vector<ir::Tensor>>(devices))
      .status();
}

TEST(RuntimeParallelism, DevicesShareTheThreads) {
  Runtime rt({.num_devices = 8, .num_threads = 4});
  for (auto [devices, expected] : {std::pair{1, 4}, {2, 2}, {3, 1}, {4, 1}, {8, 1}}) {
    ProbeExecutable probe;
    ASSERT_TRUE(RunOn(rt, devices, probe).ok());
    EXPECT_EQ(probe.available(), std::set<int>{expected}) << devices << " devices";
    EXPECT_LE(probe.max_threads_used(), expected) << devices << " devices";
  }
}

TEST(RuntimeParallelism, ASingleDeviceUsesTheHelpers) {
  Runtime rt({.num_devices = 1, .num_threads = 2});
  int max_used = 0;
  // A helper may be slow to wake on a loaded machine: some run must see it take part.
  for (int attempt = 0; attempt < 50 && max_used < 2; ++attempt) {
    ProbeExecutable probe;
    ASSERT_TRUE(RunOn(rt, 1, probe).ok());
    max_used = std::max(max_used, probe.max_threads_used());
  }
  EXPECT_EQ(max_used, 2);
}

TEST(RuntimeParallelism, MoreDevicesThanThreadsRunOneThreadEach) {
  Runtime rt({.num_devices = 16, .num_threads = 2});
  ProbeExecutable probe;
  ASSERT_TRUE(RunOn(rt, 16, probe).ok());
  EXPECT_EQ(probe.available(), std::set<int>{1});
  EXPECT_EQ(probe.max_threads_used(), 1);
}

// Counts how many devices are inside Run at once.
class OverlapExecutable final : public backends::Executable {
 public:
  absl::StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>&,
                                              backends::DeviceContext&) const override {
    const int now = inside_.fetch_add(1) + 1;
    for (int seen = max_inside_.load(); now > seen && !max_inside_.compare_exchange_weak(seen, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    inside_.fetch_sub(1);
    return std::vector<ir::Tensor>{};
  }
  std::string backend() const override { return "overlap"; }
  int max_inside() const { return max_inside_.load(); }

 private:
  mutable std::atomic<int> inside_{0};
  mutable std::atomic<int> max_inside_{0};
};

TEST(RuntimeParallelism, DevicesBeyondTheThreadsTakeTurns) {
  for (int threads : {1, 2, 3}) {
    Runtime rt({.num_devices = 8, .num_threads = threads});
    OverlapExecutable probe;
    std::vector<const backends::Executable*> programs(8, &probe);
    ASSERT_TRUE(rt.RunSpmd(LineMesh(8), programs, std::vector<std::vector<ir::Tensor>>(8)).ok());
    EXPECT_GE(probe.max_inside(), 1);
    EXPECT_LE(probe.max_inside(), threads) << threads << " threads";
  }
}

TEST(CoreSemaphoreTest, BoundsConcurrencyAndServesEveryone) {
  CoreSemaphore cores(2);
  std::atomic<int> inside{0}, max_inside{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        CoreHold hold(&cores);
        const int now = inside.fetch_add(1) + 1;
        for (int seen = max_inside.load();
             now > seen && !max_inside.compare_exchange_weak(seen, now);) {
        }
        std::this_thread::yield();
        inside.fetch_sub(1);
      }
      done.fetch_add(1);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(done.load(), 8);
  EXPECT_LE(max_inside.load(), 2);
}

TEST(RuntimeParallelism, DefaultIsTheAvailableCores) {
  Runtime rt({.num_devices = 1});
  ProbeExecutable probe;
  ASSERT_TRUE(RunOn(rt, 1, probe).ok());
  EXPECT_EQ(probe.available(), std::set<int>{backends::AvailableCores()});
}

}  // namespace
}  // namespace shardjit::runtime
