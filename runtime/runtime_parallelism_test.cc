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
#include "backends/reference/evaluator.h"
#include "base/thread_pool.h"
#include "gtest/gtest.h"
#include "ir/types.h"
#include "runtime/runtime.h"

namespace shardjit::runtime {
namespace {

// Records the parallelism it runs with, and which threads a parallel loop over it used.
class ProbeExecutable final : public backends::Executable {
 public:
  absl::StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>&,
                                              backends::DeviceContext&) const override {
    const base::Parallelism p = base::CurrentParallelism();
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
  const backends::Backend& backend() const override {
    return backends::reference::ReferenceBackend();
  }

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

absl::Status RunOn(Runtime& rt, int devices, const backends::Executable& probe) {
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

// Two tasks that each wait for the other to start: they finish together only if a helper of the
// runtime runs one of them (the caller is busy with the other).
class TwoTasksMeet final : public backends::Executable {
 public:
  absl::StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>&,
                                              backends::DeviceContext&) const override {
    std::atomic<int> started{0};
    base::CurrentParallelism().ParallelFor(2, [&](int) {
      started.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (started.load() < 2) {
        if (std::chrono::steady_clock::now() > deadline) {
          met_ = false;
          return;
        }
        std::this_thread::yield();
      }
    });
    return std::vector<ir::Tensor>{};
  }
  const backends::Backend& backend() const override {
    return backends::reference::ReferenceBackend();
  }
  bool met() const { return met_; }

 private:
  mutable std::atomic<bool> met_{true};
};

TEST(RuntimeParallelism, ASingleDeviceUsesTheHelpers) {
  Runtime rt({.num_devices = 1, .num_threads = 2});
  for (int round = 0; round < 5; ++round) {
    TwoTasksMeet program;
    ASSERT_TRUE(RunOn(rt, 1, program).ok());
    EXPECT_TRUE(program.met()) << "round " << round;
  }
}

TEST(RuntimeParallelism, MoreDevicesThanThreadsRunOneThreadEach) {
  Runtime rt({.num_devices = 16, .num_threads = 2});
  ProbeExecutable probe;
  ASSERT_TRUE(RunOn(rt, 16, probe).ok());
  EXPECT_EQ(probe.available(), std::set<int>{1});
  EXPECT_EQ(probe.max_threads_used(), 1);
}

// Counts how many devices are inside Run at once, and on which threads they run. A device stays
// inside until `at_once` devices have been inside together (the most the test expects), so that
// those devices overlap for certain instead of by luck; if that never happens within 30 s, it
// gives up (and so do the devices after it) and the count stays below `at_once`.
class OverlapExecutable final : public backends::Executable {
 public:
  explicit OverlapExecutable(int at_once) : at_once_(at_once) {}
  absl::StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>&,
                                              backends::DeviceContext&) const override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads_.insert(std::this_thread::get_id());
    }
    const int now = inside_.fetch_add(1) + 1;
    for (int seen = max_inside_.load(); now > seen && !max_inside_.compare_exchange_weak(seen, now);) {
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (max_inside_.load() < at_once_ && !gave_up_.load()) {
      if (std::chrono::steady_clock::now() > deadline) gave_up_ = true;
      std::this_thread::yield();
    }
    inside_.fetch_sub(1);
    return std::vector<ir::Tensor>{};
  }
  const backends::Backend& backend() const override {
    return backends::reference::ReferenceBackend();
  }
  int max_inside() const { return max_inside_.load(); }
  // Distinct threads the devices ran on.
  int threads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(threads_.size());
  }

 private:
  const int at_once_;
  mutable std::atomic<int> inside_{0};
  mutable std::atomic<int> max_inside_{0};
  mutable std::atomic<bool> gave_up_{false};
  mutable std::mutex mu_;
  mutable std::set<std::thread::id> threads_;
};

TEST(RuntimeParallelism, DevicesBeyondTheThreadsTakeTurns) {
  for (int threads : {1, 2, 3}) {
    Runtime rt({.num_devices = 8, .num_threads = threads});
    OverlapExecutable probe(threads);
    std::vector<const backends::Executable*> programs(8, &probe);
    ASSERT_TRUE(rt.RunSpmd(LineMesh(8), programs, std::vector<std::vector<ir::Tensor>>(8)).ok());
    // Every thread computes a device at once, and the devices beyond them wait for their turn
    // on those same threads.
    EXPECT_EQ(probe.max_inside(), threads) << threads << " threads";
    EXPECT_EQ(probe.threads(), threads) << threads << " threads";
  }
}

// Each device computes for a while, holding its core, then meets the others in a psum.
class ComputeThenPsum final : public backends::Executable {
 public:
  explicit ComputeThenPsum(std::chrono::milliseconds compute) : compute_(compute) {}
  absl::StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>&,
                                              backends::DeviceContext& device) const override {
    std::this_thread::sleep_for(compute_);
    ir::Op psum;
    psum.set_opcode("psum");
    psum.mutable_all_reduce()->add_axes("x");
    *psum.add_result_types() = ir::ToProto(ir::ShapedType{ir::DType::kF32, {}});
    return device.RunCollective(
        psum, {ir::Tensor::FromDoubles({ir::DType::kF32, {}}, {1.0}, device.allocator())});
  }
  const backends::Backend& backend() const override {
    return backends::reference::ReferenceBackend();
  }

 private:
  std::chrono::milliseconds compute_;
};

TEST(RuntimeParallelism, TurnsDoNotCountAsCollectiveTimeouts) {
  // 8 devices take turns on one core for 60 ms each: the first waits ~420 ms at the psum, longer
  // than the timeout, but the run makes progress all along (a core changes hands every 60 ms).
  Runtime rt({.num_devices = 8, .collective_timeout = absl::Milliseconds(250), .num_threads = 1});
  ComputeThenPsum program(std::chrono::milliseconds(60));
  std::vector<const backends::Executable*> programs(8, &program);
  absl::StatusOr<std::vector<std::vector<ir::Tensor>>> out =
      rt.RunSpmd(LineMesh(8), programs, std::vector<std::vector<ir::Tensor>>(8));
  ASSERT_TRUE(out.ok()) << out.status();
  for (const auto& results : *out) EXPECT_EQ(results[0].GetDouble(0), 8.0);
}

TEST(RuntimeParallelism, AMissingPeerStillTimesOut) {
  // Device 0 meets a psum that device 1 never runs: no progress, so the timeout fires.
  Runtime rt({.num_devices = 2, .collective_timeout = absl::Milliseconds(100), .num_threads = 1});
  ComputeThenPsum meets(std::chrono::milliseconds(0));
  OverlapExecutable skips(1);
  absl::StatusOr<std::vector<std::vector<ir::Tensor>>> out =
      rt.RunSpmd(LineMesh(2), {&meets, &skips}, std::vector<std::vector<ir::Tensor>>(2));
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(out.status())) << out.status();
}

// A device named at two mesh positions would run twice at once: the run is refused.
TEST(RuntimeParallelism, ADeviceAtTwoPositionsIsAnError) {
  Runtime rt({.num_devices = 2, .num_threads = 1});
  ProbeExecutable probe;
  ir::Mesh mesh = LineMesh(2);
  mesh.add_device_ids(1);
  mesh.add_device_ids(1);
  absl::StatusOr<std::vector<std::vector<ir::Tensor>>> out =
      rt.RunSpmd(mesh, {&probe, &probe}, std::vector<std::vector<ir::Tensor>>(2));
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(out.status()));
  EXPECT_NE(out.status().message().find("names device 1 at more than one position"),
            std::string::npos)
      << out.status();
  EXPECT_TRUE(RunOn(rt, 2, probe).ok());  // the runtime is unaffected
}

TEST(RuntimeParallelism, DefaultIsTheAvailableCores) {
  Runtime rt({.num_devices = 1});
  ProbeExecutable probe;
  ASSERT_TRUE(RunOn(rt, 1, probe).ok());
  EXPECT_EQ(probe.available(), std::set<int>{base::AvailableCores()});
}

}  // namespace
}  // namespace shardjit::runtime
