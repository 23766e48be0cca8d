// Kernels that reach other devices (pl::make_async_remote_copy, semaphore_signal to a DeviceId)
// and local copies and semaphores, on both backends: values against hand-derived ones (a shift
// around a ring by mesh coordinates and by logical id, on two and three mesh axes, an mpmd_map
// whose two kernels copy from one to the other, a local copy into a window, semaphore reads), and
// every error: a device outside the mesh (signalled, or copied to), a semaphore index outside its
// array, a copy into a block that changes every step, a wait its semaphore never satisfies and a
// peer that never reaches the kernel (both failing at the collective timeout with the kernel,
// grid index, semaphore and devices), and a kernel cancelled while it waits.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "backends/x86/pallas_call.h"
#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;

Tracer S32(int64_t v) { return lax::scalar(static_cast<double>(v), DType::kS32); }

class PallasRemoteTest : public ::testing::TestWithParam<Backend> {
 protected:
  // On the x86 backend every kernel here runs compiled: none falls back to the interpreter.
  void SetUp() override { interpreted_ = backends::x86::GetPallasCallStats().interpreted; }
  void TearDown() override {
    if (GetParam() == Backend::kX86) {
      EXPECT_EQ(backends::x86::GetPallasCallStats().interpreted, interpreted_);
    }
  }
  int64_t interpreted_ = 0;

  // jit(shard_map(kernel call)) over {x:2, y:2} of f32[2, 3] blocks (P(x, y) of f32[4, 6]).
  absl::StatusOr<Array> RunOnGrid(const pl::PallasCall& call, Runtime& rt,
                                  RunOptions options = {}) {
    Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
    std::vector<double> v(24);
    for (int i = 0; i < 24; ++i) v[i] = i;
    Array x = *device_put(HostTensor(DType::kF32, {4, 6}, v), NamedSharding(mesh, P("x", "y")));
    auto f = jit(shard_map([&](Tracer t) { return call(t)[0]; }, mesh, {P("x", "y")},
                           {P("x", "y")}),
                 {.backend = GetParam()});
    return f.call({x}, options);
  }
};

// Each device sends its block to `target` (a DeviceId built from the device's coordinates) and
// receives one: out = the block of the device whose target it is. With `barrier`, each first
// signals its target's barrier semaphore and waits for its own.
pl::PallasCall Shift(std::function<pl::DeviceId(Tracer x, Tracer y)> target,
                     std::string name = "shift", bool barrier = true) {
  return pl::pallas_call(
      [target, barrier](pl::Ref in, pl::Ref out, pl::Ref send, pl::Ref recv) {
        Tracer x = lax::axis_index("x"), y = lax::axis_index("y");
        if (barrier) {
          pl::semaphore_signal(pl::get_barrier_semaphore(), 1, target(x, y));
          pl::semaphore_wait(pl::get_barrier_semaphore(), 1);
        }
        pl::AsyncCopy copy = pl::make_async_remote_copy(in, out, send, recv, target(x, y));
        copy.start();
        copy.wait();
      },
      {.out_shapes = {{DType::kF32, {2, 3}}},
       .in_specs = {pl::BlockSpec::Any()},
       .out_specs = {pl::BlockSpec::Any()},
       .scratch_shapes = {pl::DmaSemaphores(), pl::DmaSemaphores()},
       .name = std::move(name),
       .barrier_semaphore = barrier});
}

// The f32[4,6] array whose (x, y) block holds the block of device (x, y) moved by `from` (the
// device whose block lands at (x, y)).
std::vector<double> Moved(std::function<std::pair<int, int>(int x, int y)> from) {
  std::vector<double> out(24);
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 6; ++c) {
      auto [sx, sy] = from(r / 2, c / 3);
      out[r * 6 + c] = (sx * 2 + r % 2) * 6 + sy * 3 + c % 3;
    }
  }
  return out;
}

TEST_P(PallasRemoteTest, ShiftsByMeshCoordinatesAndByLogicalId) {
  for (int threads : {1, 2}) {
    Runtime rt({.num_devices = 4, .num_threads = threads});
    // Along y, the other axis kept.
    absl::StatusOr<Array> got = RunOnGrid(
        Shift([](Tracer, Tracer y) { return pl::DeviceId({{"y", (y + 1) % 2}}); }), rt);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->to_host()->ToDoubles(), Moved([](int x, int y) {
                return std::pair{x, 1 - y};
              }));
    // Both axes at once: (x, y) -> (1 - x, 1 - y).
    got = RunOnGrid(Shift([](Tracer x, Tracer y) {
                      return pl::DeviceId({{"x", 1 - x}, {"y", 1 - y}});
                    }),
                    rt);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->to_host()->ToDoubles(), Moved([](int x, int y) {
                return std::pair{1 - x, 1 - y};
              }));
    // Logical ids are row-major positions: (x, y) -> position (2x + y + 1) mod 4.
    got = RunOnGrid(Shift([](Tracer x, Tracer y) {
                      return pl::DeviceId::Logical((x * 2 + y + 1) % 4);
                    }),
                    rt);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->to_host()->ToDoubles(), Moved([](int x, int y) {
                const int p = (x * 2 + y + 3) % 4;
                return std::pair{p / 2, p % 2};
              }));
  }
}

// Device ids as coordinates over three mesh axes, {x:2, y:2, z:2}: (x, y, z) sends its block of
// f32[4, 6, 4] (P(x, y, z)) to (x, 1 - y, (z + 1) mod 2), by coordinates and by logical id.
TEST_P(PallasRemoteTest, ShiftsOnAThreeAxisMesh) {
  Runtime rt({.num_devices = 8, .num_threads = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}, {"z", 2}});
  std::vector<double> v(96);
  for (int i = 0; i < 96; ++i) v[i] = i;
  Array x = *device_put(HostTensor(DType::kF32, {4, 6, 4}, v),
                        NamedSharding(mesh, P("x", "y", "z")));
  for (bool logical : {false, true}) {
    SCOPED_TRACE(logical ? "logical" : "coordinates");
    auto call = pl::pallas_call(
        [logical](pl::Ref in, pl::Ref out, pl::Ref send, pl::Ref recv) {
          Tracer i = lax::axis_index("x"), j = lax::axis_index("y"), k = lax::axis_index("z");
          Tracer to_y = S32(1) - j, to_z = (k + S32(1)) % S32(2);
          pl::DeviceId target = logical ? pl::DeviceId::Logical(i * S32(4) + to_y * S32(2) + to_z)
                                        : pl::DeviceId({{"y", to_y}, {"z", to_z}});
          pl::Ref barrier = pl::get_barrier_semaphore();
          pl::semaphore_signal(barrier, 1, target);
          pl::semaphore_wait(barrier, 1);
          pl::AsyncCopy copy = pl::make_async_remote_copy(in, out, send, recv, target);
          copy.start();
          copy.wait();
        },
        {.out_shapes = {{DType::kF32, {2, 3, 2}}},
         .in_specs = {pl::BlockSpec::Any()},
         .out_specs = {pl::BlockSpec::Any()},
         .scratch_shapes = {pl::DmaSemaphores(), pl::DmaSemaphores()},
         .name = "shift3",
         .barrier_semaphore = true});
    auto f = jit(shard_map([&](Tracer t) { return call(t)[0]; }, mesh, {P("x", "y", "z")},
                           {P("x", "y", "z")}),
                 {.backend = GetParam()});
    absl::StatusOr<Array> got = f(x);
    ASSERT_TRUE(got.ok()) << got.status();
    const std::vector<double> out = got->to_host()->ToDoubles();
    ASSERT_EQ(out.size(), 96u);
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 6; ++c) {
        for (int d = 0; d < 4; ++d) {
          // Block (r/2, c/3, d/2) came from (r/2, 1 - c/3, 1 - d/2) (the z shift is its own
          // inverse on two devices).
          const int sr = r, sc = (1 - c / 3) * 3 + c % 3, sd = (1 - d / 2) * 2 + d % 2;
          EXPECT_EQ(out[(r * 6 + c) * 4 + d], v[(sr * 6 + sc) * 4 + sd])
              << r << "," << c << "," << d;
        }
      }
    }
  }
}

// Seed 002's MPMD kernels talking: on {x:2, y:2}, row x=0 runs a producer kernel that squares its
// block into scratch and copies it to the device below it (x=1, same y), row x=1 a consumer
// kernel that waits for that copy and adds it to its own block. The two kernels differ but lay
// out their refs alike, so a copy and its semaphore land in the same params.
TEST_P(PallasRemoteTest, MpmdKernelsCopyBetweenPrograms) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  std::vector<double> v(24);
  for (int i = 0; i < 24; ++i) v[i] = i - 7;
  Array x = *device_put(HostTensor(DType::kF32, {4, 6}, v), NamedSharding(mesh, P("x", "y")));
  const pl::PallasCallSpec spec{.out_shapes = {{DType::kF32, {2, 3}}},
                                .in_specs = {pl::BlockSpec::Any()},
                                .out_specs = {pl::BlockSpec::Any()},
                                .scratch_shapes = {{DType::kF32, {2, 3}}, pl::DmaSemaphores(),
                                                   pl::DmaSemaphores()}};
  auto producer = [&](Tracer a) {
    pl::PallasCallSpec s = spec;
    s.name = "producer";
    return pl::pallas_call(
        [](pl::Ref in, pl::Ref out, pl::Ref stage, pl::Ref send, pl::Ref recv) {
          Tracer block = in.load();
          stage.store(block * block);
          out.store(block);
          pl::AsyncCopy copy = pl::make_async_remote_copy(stage, stage, send, recv,
                                                          pl::DeviceId({{"x", S32(1)}}));
          copy.start();
          copy.wait_send();
        },
        s)(a)[0];
  };
  auto consumer = [&](Tracer a) {
    pl::PallasCallSpec s = spec;
    s.name = "consumer";
    return pl::pallas_call(
        [](pl::Ref in, pl::Ref out, pl::Ref stage, pl::Ref send, pl::Ref recv) {
          pl::make_async_remote_copy(stage, stage, send, recv, {}).wait_recv();
          out.store(in.load() + stage.load());
        },
        s)(a)[0];
  };
  MpmdMapped f = mpmd_map(mesh,
                          {Program(PositionsAt(mesh, "x", 0), producer),
                           Program(PositionsAt(mesh, "x", 1), consumer)},
                          {P("x", "y")}, {P("x", "y")}, {.backend = GetParam()});
  absl::StatusOr<std::vector<Array>> got = f(x);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<double> want(24);
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 6; ++c) {
      const double above = v[(r % 2) * 6 + c];
      want[r * 6 + c] = r < 2 ? v[r * 6 + c] : v[r * 6 + c] + above * above;
    }
  }
  EXPECT_EQ((*got)[0].to_host()->ToDoubles(), want);
}

TEST_P(PallasRemoteTest, LocalCopiesAndSemaphoreReads) {
  // out = [in rows swapped]; out[0, 0] then holds the DMA semaphore's count after a copy
  // (12 bytes: 3 f32) and after its wait (0), and a regular semaphore's after signals.
  auto call = pl::pallas_call(
      [](pl::Ref in, pl::Ref out, pl::Ref dma, pl::Ref sems) {
        pl::AsyncCopy top = pl::make_async_copy(in.at({0}), out.at({1}), dma.at({0}));
        pl::AsyncCopy bottom = pl::make_async_copy(in.at({1}), out.at({0}), dma.at({1}));
        top.start();
        bottom.start();
        Tracer pending = pl::semaphore_read(dma.at({0}));
        top.wait();
        bottom.wait();
        Tracer after = pl::semaphore_read(dma.at({0}));
        pl::semaphore_signal(sems.at({1}), 5);
        pl::semaphore_signal(sems.at({1}), 2);
        pl::semaphore_wait(sems.at({1}), 3);
        Tracer left = pl::semaphore_read(sems.at({1}));
        pl::semaphore_wait(sems.at({1}), 4);
        Tracer row = lax::convert_element_type(
            lax::concatenate({lax::broadcast_in_dim(pending, {1}, {}),
                              lax::broadcast_in_dim(after, {1}, {}),
                              lax::broadcast_in_dim(left, {1}, {})},
                             0),
            DType::kF32);
        out.store({2}, row);
      },
      {.out_shapes = {{DType::kF32, {3, 3}}},
       .in_specs = {pl::BlockSpec::Any()},
       .out_specs = {pl::BlockSpec::Any()},
       .scratch_shapes = {pl::DmaSemaphores({2}), pl::Semaphores({2})},
       .name = "local"});
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(HostTensor(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6}),
                        NamedSharding(mesh, P()));
  absl::StatusOr<Array> got =
      jit([&](Tracer t) { return call(t)[0]; }, {.backend = GetParam()})(x);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->to_host()->ToDoubles(), (std::vector<double>{4, 5, 6, 1, 2, 3, 12, 0, 4}));
}

TEST_P(PallasRemoteTest, DeviceOutsideTheMesh) {
  Runtime rt({.num_devices = 4});
  absl::StatusOr<Array> got = RunOnGrid(
      Shift([](Tracer x, Tracer) { return pl::DeviceId({{"x", x + 2}}); }, "far"), rt);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(absl::IsOutOfRange(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("semaphore_signal: kernel far at grid index (): device (x="));
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("is outside the mesh {x:2, y:2}: coordinate"));
  got = RunOnGrid(Shift([](Tracer, Tracer) { return pl::DeviceId::Logical(S32(4)); }, "far"),
                  rt);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("logical device id 4 is outside the mesh {x:2, y:2} of 4 devices"));
  // A remote copy (no signal before it) to a device outside the mesh.
  got = RunOnGrid(Shift([](Tracer, Tracer y) { return pl::DeviceId({{"y", y - S32(3)}}); },
                        "copy_far", /*barrier=*/false),
                  rt);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(absl::IsOutOfRange(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("dma_start: kernel copy_far at grid index (): device (y=-"));
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("is outside the mesh {x:2, y:2}: coordinate -"));
}

TEST_P(PallasRemoteTest, SemaphoreIndexOutsideItsArray) {
  Runtime rt({.num_devices = 4});
  auto call = pl::pallas_call([](pl::Ref in, pl::Ref out, pl::Ref sems) {
    pl::semaphore_signal(sems.at({S32(2)}), 1);
    out.store(in.load());
  },
                              {.out_shapes = {{DType::kF32, {2, 3}}},
                               .scratch_shapes = {pl::Semaphores({2})},
                               .name = "sems"});
  absl::StatusOr<Array> got = RunOnGrid(call, rt);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("semaphore_signal: kernel sems at grid index (): semaphore index (2) is "
                        "outside sem[2]"));
}

TEST_P(PallasRemoteTest, RemoteCopyIntoABlockIsRefused) {
  Runtime rt({.num_devices = 4});
  auto call = pl::pallas_call(
      [](pl::Ref in, pl::Ref out, pl::Ref send, pl::Ref recv) {
        Tracer y = lax::axis_index("y");
        pl::AsyncCopy copy = pl::make_async_remote_copy(in, out, send, recv,
                                                        pl::DeviceId({{"y", 1 - y}}));
        copy.start();
        copy.wait();
      },
      {.out_shapes = {{DType::kF32, {2, 3}}},
       .grid = {1},
       .in_specs = {pl::BlockSpec::Any()},
       .out_specs = {pl::BlockSpec({2, 3}, [](pl::Idx) { return pl::Blocks{0, 0}; })},
       .scratch_shapes = {pl::DmaSemaphores(), pl::DmaSemaphores()},
       .name = "blocked"});
  absl::StatusOr<Array> got = RunOnGrid(call, rt);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("dma_start: kernel blocked at grid index (0): copies into param 1 of "
                        "device"));
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("not to blocks (which change at every grid step)"));
}

TEST_P(PallasRemoteTest, SemaphoreWaitedOnMoreThanSignalledFailsAtTheTimeout) {
  Runtime rt({.num_devices = 4, .collective_timeout = absl::Milliseconds(100)});
  auto call = pl::pallas_call([](pl::Ref in, pl::Ref out, pl::Ref sem) {
    pl::semaphore_signal(sem, 1, pl::DeviceId({{"y", 1 - lax::axis_index("y")}}));
    pl::semaphore_wait(sem, 2);
    out.store(in.load());
  },
                              {.out_shapes = {{DType::kF32, {2, 3}}},
                               .scratch_shapes = {pl::Semaphores()},
                               .name = "greedy"});
  absl::StatusOr<Array> got = RunOnGrid(call, rt);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
  const std::string message(got.status().message());
  EXPECT_THAT(message, HasSubstr("semaphore_wait: kernel greedy at grid index () on device "));
  EXPECT_THAT(message, HasSubstr("scratch ref 0[] waited "));
  EXPECT_THAT(message, HasSubstr(" for 2 and holds 1; devices ["));
  EXPECT_THAT(message, HasSubstr("] are in this kernel"));
  // The runtime runs the next program.
  got = RunOnGrid(Shift([](Tracer, Tracer y) { return pl::DeviceId({{"y", 1 - y}}); }), rt);
  EXPECT_TRUE(got.ok()) << got.status();
}

TEST_P(PallasRemoteTest, PeerThatNeverStartsTheKernelFailsAtTheTimeout) {
  Runtime rt({.num_devices = 2, .collective_timeout = absl::Milliseconds(100)});
  Mesh mesh = *make_mesh(rt, {{"i", 2}});
  auto call = pl::pallas_call([](pl::Ref in, pl::Ref out, pl::Ref sem) {
    pl::semaphore_signal(sem, 1, pl::DeviceId({{"i", S32(0)}}));
    out.store(in.load());
  },
                              {.out_shapes = {{DType::kF32, {2}}},
                               .scratch_shapes = {pl::Semaphores()},
                               .name = "lonely"});
  // Only device 1 runs the kernel (the true branch of cond(axis_index)).
  auto f = jit(shard_map(
                   [&](Tracer t) {
                     return lax::cond(
                         lax::axis_index("i"), [&](std::vector<Tracer> a) { return call(a[0]); },
                         [](std::vector<Tracer> a) { return a; }, {t})[0];
                   },
                   mesh, {P("i")}, {P("i")}),
               {.backend = GetParam()});
  Array x = *device_put(HostTensor(DType::kF32, {4}, {1, 2, 3, 4}), NamedSharding(mesh, P("i")));
  absl::StatusOr<Array> got = f(x);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("semaphore_signal: kernel lonely at grid index () on device 1: waited "));
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("for device 0 to start its instance of the kernel"));
}

TEST_P(PallasRemoteTest, KernelCancelledWhileItWaits) {
  Runtime rt({.num_devices = 4, .collective_timeout = absl::InfiniteDuration()});
  constexpr int64_t kScratch = 1 << 18;  // floats: allocated as the kernel starts
  auto call = pl::pallas_call([](pl::Ref in, pl::Ref out, pl::Ref, pl::Ref sem) {
    pl::semaphore_wait(sem, 1);  // never signalled
    out.store(in.load());
  },
                              {.out_shapes = {{DType::kF32, {2, 3}}},
                               .scratch_shapes = {{DType::kF32, {kScratch}}, pl::Semaphores()},
                               .name = "patient"});
  std::vector<int64_t> before(4);
  for (int d = 0; d < 4; ++d) before[d] = rt.memory(d).current_bytes;
  RunOptions options;
  options.cancel = std::make_shared<CancellationToken>();
  absl::StatusOr<Array> got;
  std::thread run([&] { got = RunOnGrid(call, rt, options); });
  // Cancelled once every device is in the kernel (it holds the scratch buffer).
  for (int d = 0; d < 4; ++d) {
    while (rt.memory(d).current_bytes < before[d] + kScratch * 4) std::this_thread::yield();
  }
  options.cancel->Cancel();
  run.join();
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(absl::IsCancelled(got.status())) << got.status();
  for (int d = 0; d < 4; ++d) EXPECT_EQ(rt.memory(d).current_bytes, before[d]);
}

INSTANTIATE_TEST_SUITE_P(Backends, PallasRemoteTest,
                         ::testing::Values(Backend::kReference, Backend::kX86),
                         [](const auto& info) {
                           return info.param == Backend::kX86 ? "x86" : "reference";
                         });

}  // namespace
}  // namespace shardjit
