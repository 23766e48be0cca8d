// Runs stopped before they finish: a deadline (DeadlineExceeded) and a token cancelled from
// another thread (Cancelled), on programs that would run for hours, with devices computing and
// waiting at collectives, and inside one long GEMM; every device stops, its memory is released,
// and the runtime runs the next program as usual.
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "frontend/shardjit.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

constexpr int64_t kForever = 2147483647;  // loop trips (the most an s32 index allows): minutes at the fastest

// x <- x * 0.5 + psum(x) / n, `trips` times, per device of a mesh over "i": every step waits at a
// collective for every other device.
Jitted<Array> Loop(const Mesh& mesh, int64_t trips) {
  const double n = static_cast<double>(mesh.size());
  return jit(shard_map(
      [trips, n](Tracer x) {
        return lax::fori_loop(
            0, trips, [n](Tracer, Tracer c) { return c * 0.5 + lax::psum(c, "i") * (1.0 / n); }, x);
      },
      mesh, {P("i")}, {P("i")}));
}

struct Fixture {
  explicit Fixture(int devices, int threads)
      : rt({.num_devices = devices, .num_threads = threads}),
        mesh(*make_mesh(rt, {{"i", devices}})),
        x(*device_put(*random::normal(random::key(1), {devices * 64}),
                      NamedSharding(mesh, P("i")))) {}
  int64_t LiveBytes() {
    int64_t live = 0;
    for (int d = 0; d < rt.num_devices(); ++d) live += rt.memory(d).current_bytes;
    return live;
  }
  Runtime rt;
  Mesh mesh;
  Array x;
};

// The next run on the same runtime gives the same values as on a fresh one.
void ExpectRunsNormally(Fixture& f) {
  absl::StatusOr<Array> out = Loop(f.mesh, 3)(f.x);
  ASSERT_TRUE(out.ok()) << out.status();
  Fixture fresh(static_cast<int>(f.mesh.size()), 1);
  absl::StatusOr<Array> want = Loop(fresh.mesh, 3)(fresh.x);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(out->to_host()->ToDoubles(), want->to_host()->ToDoubles());
}

// Live bytes of each device of `rt`.
std::vector<int64_t> LiveBytesPerDevice(Runtime& rt) {
  std::vector<int64_t> live(rt.num_devices());
  for (int d = 0; d < rt.num_devices(); ++d) live[d] = rt.memory(d).current_bytes;
  return live;
}

// Waits until every device of `rt` has held at least `bytes` more than `before` (its live bytes
// before the run) at some point: it allocated that much for the run, so it is running it. Polls,
// failing after 30 s; `what` names the awaited state in the failure.
void WaitUntilEveryDeviceAllocated(Runtime& rt, const std::vector<int64_t>& before, int64_t bytes,
                                   const std::string& what) {
  std::vector<bool> seen(rt.num_devices(), false);
  int left = rt.num_devices();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (left > 0) {
    for (int d = 0; d < rt.num_devices(); ++d) {
      if (!seen[d] && rt.memory(d).current_bytes >= before[d] + bytes) {
        seen[d] = true;
        --left;
      }
    }
    if (left == 0) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << left << " devices not " << what << " after 30 s";
    std::this_thread::yield();
  }
}

class CancellationTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(CancellationTest, DeadlineStopsEveryDevice) {
  auto [devices, threads] = GetParam();
  Fixture f(devices, threads);
  auto forever = Loop(f.mesh, kForever);
  ASSERT_TRUE(forever.lower(f.x).ok());
  ASSERT_TRUE(Loop(f.mesh, 3)(f.x).ok());  // compiled and warm
  const int64_t live = f.LiveBytes();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<Array> out = forever.call({f.x}, RunOptions::WithTimeout(absl::Milliseconds(200)));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(out.status())) << out.status();
  EXPECT_GE(seconds, 0.15);  // compiling aside, it ran until the deadline
  EXPECT_LT(seconds, 5.0);
  EXPECT_EQ(f.LiveBytes(), live);
  ExpectRunsNormally(f);
}

TEST_P(CancellationTest, TokenCancelledFromAnotherThread) {
  auto [devices, threads] = GetParam();
  Fixture f(devices, threads);
  auto forever = Loop(f.mesh, kForever);
  ASSERT_TRUE(Loop(f.mesh, 3)(f.x).ok());
  RunOptions options;
  options.cancel = std::make_shared<CancellationToken>();
  absl::StatusOr<Array> out;
  std::atomic<bool> returned{false};
  std::chrono::steady_clock::time_point returned_at;
  const std::vector<int64_t> before = LiveBytesPerDevice(f.rt);
  std::thread run([&] {
    out = forever.call({f.x}, options);
    returned_at = std::chrono::steady_clock::now();
    returned = true;
  });
  // Cancelled once every device is inside the loop: it holds a carry, a block the size of its
  // block of x, beside x.
  WaitUntilEveryDeviceAllocated(f.rt, before, f.x.shards()[0].byte_size(), "inside the loop");
  EXPECT_FALSE(returned.load());
  const auto cancelled_at = std::chrono::steady_clock::now();
  options.cancel->Cancel();
  run.join();
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsCancelled(out.status())) << out.status();
  // One step of the loop is microseconds: the run stops well within 100 ms.
  EXPECT_LT(std::chrono::duration<double>(returned_at - cancelled_at).count(), 0.1);
  // A cancelled token cancels the next run at its first op; Reset makes it usable again.
  out = Loop(f.mesh, 3).call({f.x}, options);
  EXPECT_TRUE(absl::IsCancelled(out.status())) << out.status();
  options.cancel->Reset();
  out = Loop(f.mesh, 3).call({f.x}, options);
  EXPECT_TRUE(out.ok()) << out.status();
  ExpectRunsNormally(f);
}

// A run inside one long GEMM (a 4096^3 f32 product per device: about 0.3 s or more on two
// cores of any host here) stops within 100 ms of Cancel() or of its deadline: the GEMM polls
// between blocks.
class GemmCancellationTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(GemmCancellationTest, StopsInsideTheGemm) {
  auto [devices, threads] = GetParam();
  constexpr int64_t n = 4096;
  Runtime rt({.num_devices = devices, .num_threads = threads});
  Mesh mesh = *make_mesh(rt, {{"i", devices}});
  Array x =
      *device_put(*random::normal(random::key(2), {devices * n, n}), NamedSharding(mesh, P("i")));
  Array w = *device_put(*random::normal(random::key(3), {n, n}), NamedSharding(mesh, P()));
  auto product = jit(shard_map([](Tracer a, Tracer b) { return jnp::matmul(a, b); }, mesh,
                               {P("i"), P()}, {P("i")}));
  // Compiled, and stopped before its first op.
  RunOptions expired = RunOptions::WithTimeout(absl::ZeroDuration());
  EXPECT_TRUE(absl::IsDeadlineExceeded(product.call({x, w}, expired).status()));
  int64_t live = 0;
  for (int d = 0; d < devices; ++d) live += rt.memory(d).current_bytes;

  RunOptions options;
  options.cancel = std::make_shared<CancellationToken>();
  absl::StatusOr<Array> out;
  std::chrono::steady_clock::time_point returned_at;
  const std::vector<int64_t> before = LiveBytesPerDevice(rt);
  std::thread run([&] {
    out = product.call({x, w}, options);
    returned_at = std::chrono::steady_clock::now();
  });
  // Cancelled once every device has allocated its [n, n] f32 block of the product: it is in the
  // matmul, whose GEMM takes 0.3 s or more.
  WaitUntilEveryDeviceAllocated(rt, before, n * n * int64_t{sizeof(float)}, "inside the GEMM");
  const auto cancelled_at = std::chrono::steady_clock::now();
  options.cancel->Cancel();
  run.join();
  EXPECT_TRUE(absl::IsCancelled(out.status())) << out.status();
  EXPECT_LT(std::chrono::duration<double>(returned_at - cancelled_at).count(), 0.1);

  const auto start = std::chrono::steady_clock::now();
  out = product.call({x, w}, RunOptions::WithTimeout(absl::Milliseconds(50)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(out.status())) << out.status();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.15);

  int64_t live_after = 0;
  for (int d = 0; d < devices; ++d) live_after += rt.memory(d).current_bytes;
  EXPECT_EQ(live_after, live);
  // The runtime goes on: a small product on the same devices is right.
  Array xs =
      *device_put(*random::normal(random::key(4), {devices * 3, 5}), NamedSharding(mesh, P("i")));
  Array ws = *device_put(*random::normal(random::key(5), {5, 2}), NamedSharding(mesh, P()));
  absl::StatusOr<Array> small = product(xs, ws);
  ASSERT_TRUE(small.ok()) << small.status();
  const std::vector<double> got = small->to_host()->ToDoubles();
  const std::vector<double> xv = xs.to_host()->ToDoubles(), wv = ws.to_host()->ToDoubles();
  for (int64_t i = 0; i < devices * 3; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      double want = 0;
      for (int64_t l = 0; l < 5; ++l) want += xv[i * 5 + l] * wv[l * 2 + j];
      EXPECT_NEAR(got[i * 2 + j], want, 1e-5) << i << "," << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DevicesAndThreads, GemmCancellationTest,
                         ::testing::Values(std::pair{1, 1}, std::pair{1, 2}, std::pair{2, 2}),
                         [](const auto& info) {
                           return std::to_string(info.param.first) + "devices_" +
                                  std::to_string(info.param.second) + "threads";
                         });

INSTANTIATE_TEST_SUITE_P(DevicesAndThreads, CancellationTest,
                         ::testing::Values(std::pair{1, 1}, std::pair{4, 2}, std::pair{16, 1},
                                           std::pair{16, 2}),
                         [](const auto& info) {
                           return std::to_string(info.param.first) + "devices_" +
                                  std::to_string(info.param.second) + "threads";
                         });

}  // namespace
}  // namespace shardjit
