// The runtime across processes (runtime/distributed/): each test starts this binary as 2 or 4
// processes on loopback (its launcher.h), each with 1 or 2 devices, and the children check
// themselves: every collective (blocking and async, tuple axes, axis_index_groups, psend/precv)
// and user kernels' remote copies and semaphores (the seed ring all-gather and collective matmul
// kernels) and training steps (tests/multiprocess_programs.h) computed across processes must
// equal, bit for bit, the same program run in one process on as many devices; so must the seed
// notebook's matmul variants (as compiled and as written), which also match the f64 product;
// meshes whose x axis crosses processes and y stays within (and the reverse); the file store as well as the TCP store. Failures: a killed process, one that never
// joins, one that hangs, and a mismatched program make every other process fail with an error
// naming it; a frozen one ends the wait for it at the timeout. A run posting many messages
// releases them as it goes. A child writes "ok" or its error to its result file, which the
// parent reads.
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "base/status_macros.h"
#include "frontend/shardjit.h"
#include "gtest/gtest.h"
#include "ir/ir.pb.h"
#include "runtime/device.h"
#include "runtime/distributed/launcher.h"
#include "tests/multiprocess_programs.h"

namespace shardjit {
namespace {

using multiprocess::CheckKernels;
using multiprocess::CheckSeedVariants;
using multiprocess::CheckTraining;
using multiprocess::Env;
using multiprocess::EnvInt;
using multiprocess::JobMesh;
using multiprocess::kLayout;
using multiprocess::kLocal;
using multiprocess::SameBlocks;

constexpr char kRole[] = "SHARDJIT_TEST_ROLE";

std::string ResultPath(int process) {
  return absl::StrCat(Env("TEST_TMPDIR"), "/result_", process, ".txt");
}

// Files through which the processes of a job tell each other that they reached a point (the
// parent removes them before each job).
constexpr const char* kMarkers[] = {"frozen_peer.pid", "hangs.gave_up"};

std::string MarkerPath(const std::string& name) {
  return absl::StrCat(Env("TEST_TMPDIR"), "/", name);
}

// Creates the marker `name` holding `text`, whole at once (written aside, then renamed).
void WriteMarker(const std::string& name, const std::string& text) {
  const std::string path = MarkerPath(name);
  std::ofstream(path + ".tmp") << text;
  std::rename((path + ".tmp").c_str(), path.c_str());
}

// Waits until the marker `name` exists and returns its text: sleeps on inotify events of its
// directory in between, failing after `timeout`.
absl::StatusOr<std::string> WaitForMarker(const std::string& name, absl::Duration timeout) {
  const std::string path = MarkerPath(name);
  const int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (fd < 0) return absl::InternalError(absl::StrCat("inotify_init1: ", std::strerror(errno)));
  if (inotify_add_watch(fd, Env("TEST_TMPDIR").c_str(), IN_MOVED_TO | IN_CREATE) < 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("inotify_add_watch: ", std::strerror(errno)));
  }
  const absl::Time deadline = absl::Now() + timeout;
  // Looked for after the watch is in place: a marker written meanwhile is not missed.
  while (access(path.c_str(), F_OK) != 0) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      close(fd);
      return absl::DeadlineExceededError(
          absl::StrCat(name, " not written within ", absl::FormatDuration(timeout)));
    }
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    char events[4096];
    while (read(fd, events, sizeof(events)) > 0) {
    }
  }
  close(fd);
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The state letter of process `pid` in /proc/PID/stat ('T': stopped by a signal), 0 if unknown.
char ProcessState(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  const std::string stat(std::istreambuf_iterator<char>(in), {});
  const size_t name_end = stat.rfind(')');  // "PID (NAME) STATE ...": NAME may hold anything
  return name_end == std::string::npos || name_end + 2 >= stat.size() ? 0 : stat[name_end + 2];
}

// ---------------------------------------------------------------------------------------------
// Child side
// ---------------------------------------------------------------------------------------------

// The leading dimension split over every mesh axis: one [1, ...] block per position.
PartitionSpec Stacked() {
  ir::PartitionSpec proto;
  ir::DimSpec* d = proto.add_dims();
  d->add_axes("x");
  d->add_axes("y");
  return PartitionSpec(proto);
}

Tensor Inputs(DType dtype, int64_t n) {
  std::vector<double> v(n * 4 * 6);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * i + 1.0) * 3.0 + 0.25 * (i % 7);
  return HostTensor(dtype, {n, 4, 6}, v);
}

// Every collective, each result a [1, ...] block of one position: x is the position's [4, 6].
std::vector<Tracer> Collectives(Tracer x, int64_t n) {
  const AxisNames xy{"x", "y"}, yx{"y", "x"};
  std::vector<std::pair<int64_t, int64_t>> ring;
  for (int64_t i = 0; i < n; ++i) ring.emplace_back(i, (i + 1) % n);
  AxisIndexGroups halves(2), interleaved(2);
  for (int64_t i = 0; i < n; ++i) {
    halves[i < n / 2 ? 0 : 1].push_back(i);
    interleaved[i % 2].push_back(i);
  }
  std::vector<Tracer> out = {
      lax::psum(x, "x"),
      lax::psum(x, xy),
      lax::pmean(x, "y"),
      lax::pmax(x, yx),
      lax::pmin(x, "x"),
      lax::psum(x, xy, halves),
      lax::pmax(x, xy, interleaved),
      lax::all_gather(x, "x", 0, /*tiled=*/true),
      lax::all_gather(x, xy, 1, /*tiled=*/false),
      lax::psum_scatter(x, xy, 0, /*tiled=*/true),
      lax::psum_scatter(x, "x", 1, /*tiled=*/true),
      lax::ppermute(x, xy, ring),
      lax::ppermute(x, "x", {{0, 1}, {1, 0}}),
      lax::all_to_all(x, xy, 0, 1, /*tiled=*/true),
      lax::pbroadcast(x, "x", 1),
      lax::psum_done(lax::psum_start(x, xy)),
      lax::all_gather_done(lax::all_gather_start(x, "y", 0, true)),
      lax::ppermute_done(lax::ppermute_start(x, xy, ring)),
      lax::psum_scatter_done(lax::psum_scatter_start(x, "x", 0, true)),
      lax::all_to_all_done(lax::all_to_all_start(x, xy, 0, 1, /*tiled=*/true)),
      lax::pbroadcast_done(lax::pbroadcast_start(x, "y", 0)),
      lax::precv(lax::psend(x, xy, ring), x.type(), xy, ring),
  };
  for (Tracer& r : out)
    r = lax::reshape(r, [&] {
      std::vector<int64_t> dims = r.shape();
      dims.insert(dims.begin(), 1);
      return dims;
    }());
  return out;
}

// Runs the collectives on `mesh`; results as arrays.
absl::StatusOr<std::vector<Array>> RunCollectives(const Mesh& mesh, DType dtype) {
  const int64_t n = mesh.size();
  const PartitionSpec stacked = Stacked();
  absl::StatusOr<Array> x = device_put(Inputs(dtype, n), NamedSharding(mesh, stacked));
  if (!x.ok()) return x.status();
  constexpr int kResults = 22;
  auto f = jit(shard_map(
      [n](Tracer x) {
        return Collectives(lax::reshape(x, {4, 6}), n);
      },
      mesh, {stacked}, std::vector<PartitionSpec>(kResults, stacked), /*check_vma=*/false));
  return f(*x);
}

absl::Status CheckCollectives(const std::shared_ptr<ProcessGroup>& group) {
  const int local = std::max(1, EnvInt(kLocal));
  Runtime rt({.num_devices = local, .processes = group});
  Runtime one({.num_devices = local * group->num_processes()});
  const std::string layout = Env(kLayout);
  absl::StatusOr<Mesh> mesh = JobMesh(rt, layout);
  absl::StatusOr<Mesh> mesh1 = JobMesh(one, layout);
  if (!mesh.ok()) return mesh.status();
  if (!mesh1.ok()) return mesh1.status();
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    absl::StatusOr<std::vector<Array>> got = RunCollectives(*mesh, dtype);
    if (!got.ok()) return got.status();
    absl::StatusOr<std::vector<Array>> want = RunCollectives(*mesh1, dtype);
    if (!want.ok()) return want.status();
    if (absl::Status s = SameBlocks(*got, *want, layout); !s.ok()) return s;
    // process_allgather gives every process the whole of a sharded result.
    absl::StatusOr<Tensor> all = process_allgather((*got)[1]);
    absl::StatusOr<Tensor> all1 = (*want)[1].to_host();
    if (!all.ok()) return all.status();
    if (std::memcmp(all->data(), all1->data(), all1->byte_size()) != 0) {
      return absl::InternalError("process_allgather differs from the one-process ToHost");
    }
    if ((*got)[1].to_host().ok()) return absl::InternalError("ToHost of remote blocks worked");
  }
  // Operands too large for a message's envelope (wire.h) travel apart from it, on receives the
  // receiving process posts when its devices arrive, among small ones, blocking and async; an
  // all_gather whose blocks are runs of its result receives them in place (along dim 1 here,
  // and a new leading dim), one along dim 2 copies them; a psend's follows its envelope.
  const int64_t n = mesh->size();
  std::vector<double> values(n * 3 * 160 * 560);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::cos(0.01 * i) + 0.5 * (i % 5);
  const Tensor big_host = HostTensor(DType::kF32, {n, 3, 160, 560}, values);  // 1.03 MiB blocks
  absl::StatusOr<Array> big = device_put(big_host, NamedSharding(*mesh, Stacked()));
  absl::StatusOr<Array> big1 = device_put(big_host, NamedSharding(*mesh1, Stacked()));
  if (!big.ok()) return big.status();
  if (!big1.ok()) return big1.status();
  auto large = [n](const Mesh& on) {
    std::vector<std::pair<int64_t, int64_t>> ring;
    for (int64_t i = 0; i < n; ++i) ring.emplace_back(i, (i + 1) % n);
    return jit(shard_map(
        [ring](Tracer b) {
          Tracer small = lax::slice(b, {0, 0, 0, 0}, {1, 1, 1, 4});
          return std::vector<Tracer>{
              lax::psum(b, {"x", "y"}),
              lax::psum(small, "x"),
              lax::all_gather(b, "x", 1, /*tiled=*/true),
              lax::ppermute(b, {"x", "y"}, ring),
              lax::pmax(small, {"x", "y"}),
              lax::psum_done(lax::psum_start(b, {"x", "y"})),
              lax::ppermute_done(lax::ppermute_start(b, {"x", "y"}, ring)),
              lax::all_gather(b, "x", 0, /*tiled=*/false),
              lax::all_gather(b, "y", 2, /*tiled=*/true),
              lax::all_gather_done(lax::all_gather_start(b, "x", 1, true)),
              lax::precv(lax::psend(b, {"x", "y"}, ring), b.type(), {"x", "y"}, ring)};
        },
        on, {Stacked()}, std::vector<PartitionSpec>(11, Stacked()), /*check_vma=*/false));
  };
  absl::StatusOr<std::vector<Array>> got = large(*mesh)(*big);
  if (!got.ok()) return got.status();
  absl::StatusOr<std::vector<Array>> want = large(*mesh1)(*big1);
  if (!want.ok()) return want.status();
  if (absl::Status s = SameBlocks(*got, *want, layout + " (large operands)"); !s.ok()) return s;
  // All-reduces of 2 MiB and more over members in several processes are split among the
  // processes (runtime/remote.h): each receives only the share of the operands it reduces and
  // sends the reduced share back, in pieces. f32 blocks of 4.6 MiB and bf16 of 2.3 MiB (element
  // counts no process or piece count divides), every reduction, groups across processes, within
  // one, and split by axis_index_groups, blocking and async.
  std::vector<double> wide(n * 11 * 331 * 331);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = std::sin(0.003 * i) * 4.0 + 0.25 * (i % 3);
  const Tensor huge_host = HostTensor(DType::kF32, {n, 11, 331, 331}, wide);
  absl::StatusOr<Array> huge = device_put(huge_host, NamedSharding(*mesh, Stacked()));
  absl::StatusOr<Array> huge1 = device_put(huge_host, NamedSharding(*mesh1, Stacked()));
  if (!huge.ok()) return huge.status();
  if (!huge1.ok()) return huge1.status();
  // A ppermute of 876 KiB travels inside its envelope and is handed on as a view of it.
  auto split = [n](const Mesh& on) {
    AxisIndexGroups halves(2);
    std::vector<std::pair<int64_t, int64_t>> ring;
    for (int64_t i = 0; i < n; ++i) {
      halves[i < n / 2 ? 0 : 1].push_back(i);
      ring.emplace_back(i, (i + 1) % n);
    }
    return jit(shard_map(
        [halves, ring](Tracer h) {
          const AxisNames xy{"x", "y"}, yx{"y", "x"};
          Tracer h16 = lax::convert_element_type(h, DType::kBF16);
          Tracer part = lax::slice(h, {0, 0, 0, 0}, {1, 2, 331, 331});
          return std::vector<Tracer>{lax::psum(h, xy),
                                     lax::pmean(h, "x"),
                                     lax::pmax(h, yx),
                                     lax::pmin(h, "y"),
                                     lax::psum(h16, xy),
                                     lax::pmean(h16, "x"),
                                     lax::psum(h, xy, halves),
                                     lax::psum_done(lax::psum_start(h, xy)),
                                     lax::ppermute(part, xy, ring)};
        },
        on, {Stacked()}, std::vector<PartitionSpec>(9, Stacked()), /*check_vma=*/false));
  };
  got = split(*mesh)(*huge);
  if (!got.ok()) return got.status();
  want = split(*mesh1)(*huge1);
  if (!want.ok()) return want.status();
  return SameBlocks(*got, *want, layout + " (split all-reduces)");
}

// A psum over every device; `op` picks what this process runs instead of psum. With `die`,
// runs it once, then this process dies before the second run.
absl::Status RunOnePsum(const std::shared_ptr<ProcessGroup>& group, const std::string& op,
                        absl::Duration collective_timeout, bool die = false) {
  Runtime rt({.num_devices = 1, .collective_timeout = collective_timeout, .processes = group});
  absl::StatusOr<Mesh> mesh = JobMesh(rt, "rows");
  if (!mesh.ok()) return mesh.status();
  const PartitionSpec stacked = Stacked();
  absl::StatusOr<Array> x =
      device_put(Inputs(DType::kF32, mesh->size()), NamedSharding(*mesh, stacked));
  if (!x.ok()) return x.status();
  auto f = jit(shard_map(
      [op](Tracer x) {
        return op == "pmax" ? lax::pmax(x, {"x", "y"}) : lax::psum(x, {"x", "y"});
      },
      *mesh, {stacked}, {stacked}, /*check_vma=*/false));
  absl::StatusOr<Array> out = f(*x);
  if (!die || !out.ok()) return out.status();
  if (group->process_id() == 1) raise(SIGKILL);
  return f(*x).status();
}

// Checks that `s` failed naming `needle`.
absl::Status ExpectFailure(const absl::Status& s, const std::string& needle) {
  if (s.ok()) return absl::InternalError("expected a failure naming \"" + needle + "\", got OK");
  if (!absl::StrContains(s.message(), needle)) {
    return absl::InternalError(absl::StrCat("expected a failure naming \"", needle,
                                            "\", got: ", s.ToString()));
  }
  return absl::OkStatus();
}

// A psum of operands in the envelope and past it (sent apart from it, wire.h) whose shapes differ
// between the processes: every process fails naming the mismatch, and the next run, the same
// everywhere, gives every device the sum.
absl::Status RunMismatchedLargePsum(const std::shared_ptr<ProcessGroup>& group) {
  Runtime rt({.num_devices = 1, .collective_timeout = absl::Seconds(30), .processes = group});
  absl::StatusOr<Mesh> mesh = JobMesh(rt, "rows");
  if (!mesh.ok()) return mesh.status();
  const int64_t n = mesh->size();
  auto psum_of = [&](int64_t cols) -> absl::StatusOr<Array> {
    std::vector<double> ones(n * 3 * 160 * cols, 1.0);
    absl::StatusOr<Array> x = device_put(HostTensor(DType::kF32, {n, 3, 160, cols}, ones),
                                         NamedSharding(*mesh, Stacked()));
    if (!x.ok()) return x.status();
    return jit(shard_map(
        [](Tracer b) {
          return lax::psum(b, {"x", "y"});
        },
        *mesh, {Stacked()}, {Stacked()}, /*check_vma=*/false))(*x);
  };
  // 300 KiB blocks (in the envelope), 1.1 MiB ones (apart from it) and 2.01 MiB ones (a psum
  // split among the processes, runtime/remote.h).
  for (int64_t cols : {160, 600, 1100}) {
    absl::Status mismatched = psum_of(group->process_id() == 1 ? cols + 1 : cols).status();
    if (absl::Status s = ExpectFailure(mismatched, "mismatch"); !s.ok()) return s;
    absl::StatusOr<Array> good = psum_of(cols);
    if (!good.ok()) return good.status();
    for (const Tensor& block : good->shards()) {
      if (!block.defined()) continue;
      for (double v : block.ToDoubles()) {
        if (v != static_cast<double>(n)) {
          return absl::InternalError(absl::StrCat("psum after the mismatch gave ", v));
        }
      }
    }
  }
  return absl::OkStatus();
}

// One run posting far more messages to the other process than are left for its end (small
// blocks, then blocks of 2 MiB, 82 MiB in all): 41 steps of a ppermute across processes, each
// adding 1, so every device ends with the other's block + 41; twice. The operands sent are
// released during the run (a sending thread completes them once more than a few wait): the
// device's peak stays well below the 82 MiB it would reach if all of them lived to the end.
absl::Status RunManyMessages(const std::shared_ptr<ProcessGroup>& group) {
  Runtime rt({.num_devices = 1, .collective_timeout = absl::Seconds(30), .processes = group});
  absl::StatusOr<Mesh> mesh = JobMesh(rt, "rows");
  if (!mesh.ok()) return mesh.status();
  constexpr int kSteps = 41;
  for (int64_t cols : {8, 512 << 10 >> 2}) {
    std::vector<double> v(2 * 4 * cols);
    for (size_t i = 0; i < v.size(); ++i) v[i] = (i < v.size() / 2 ? 0 : 1000) + i % 97;
    absl::StatusOr<Array> x = device_put(HostTensor(DType::kF32, {2, 4, cols}, v),
                                         NamedSharding(*mesh, Stacked()));
    if (!x.ok()) return x.status();
    auto f = jit(shard_map(
        [](Tracer b) {
          for (int i = 0; i < kSteps; ++i) b = lax::ppermute(b, "x", {{0, 1}, {1, 0}}) + 1.0;
          return b;
        },
        *mesh, {Stacked()}, {Stacked()}, /*check_vma=*/false));
    const int self = group->process_id();  // and its device's id
    for (int run = 0; run < 2; ++run) {
      rt.device(self).allocator()->ResetPeak();
      absl::StatusOr<Array> out = f(*x);
      if (!out.ok()) return out.status();
      const int64_t peak = rt.memory(self).peak_bytes;
      if (cols > 8 && peak > 60 << 20) {
        return absl::InternalError(absl::StrCat("run ", run, ": the device's peak is ", peak,
                                                " bytes: sent operands were kept to the end"));
      }
      const Tensor& block = out->shards()[self];
      const std::vector<double> got = block.ToDoubles();
      const size_t half = v.size() / 2;
      for (size_t i = 0; i < half; ++i) {
        const double want = v[(1 - self) * half + i] + kSteps;
        if (got[i] != want) {
          return absl::InternalError(absl::StrCat("blocks of ", cols, " columns, run ", run,
                                                  ": element ", i, " is ", got[i], ", not ",
                                                  want));
        }
      }
    }
  }
  return absl::OkStatus();
}

// A kernel whose semaphore_wait asks for more than its peer in the other process signals: each
// process fails at the collective timeout, naming the kernel, the semaphore, what it holds and
// the devices of the other process; the next run (a kernel whose waits are met) works.
absl::Status RunKernelThatWaitsTooLong(const std::shared_ptr<ProcessGroup>& group) {
  // Long enough for the other process to start its run on a loaded machine.
  Runtime rt({.num_devices = 1, .collective_timeout = absl::Seconds(3), .processes = group});
  absl::StatusOr<Mesh> mesh = JobMesh(rt, "rows");
  if (!mesh.ok()) return mesh.status();
  auto run = [&](int64_t wanted) {
    auto call = pl::pallas_call(
        [wanted](pl::Ref in, pl::Ref out, pl::Ref sem) {
          Tracer other = lax::scalar(1, DType::kS32) - lax::axis_index("x");
          pl::semaphore_signal(sem, 1, pl::DeviceId({{"x", other}}));
          pl::semaphore_wait(sem, wanted);
          out.store(in.load());
        },
        {.out_shapes = {{DType::kF32, {2, 3}}},
         .scratch_shapes = {pl::Semaphores()},
         .name = "greedy"});
    absl::StatusOr<Array> x = device_put(HostTensor(DType::kF32, {4, 3}, std::vector<double>(12)),
                                         NamedSharding(*mesh, P("x", None)));
    if (!x.ok()) return x.status();
    return jit(shard_map([&](Tracer t) { return call(t)[0]; }, *mesh, {P("x", None)},
                         {P("x", None)}))(*x)
        .status();
  };
  absl::Status s = run(2);
  if (!absl::IsDeadlineExceeded(s)) {
    return absl::InternalError("expected the collective timeout, got: " + s.ToString());
  }
  RETURN_IF_ERROR(ExpectFailure(s, "semaphore_wait: kernel greedy at grid index ()"));
  RETURN_IF_ERROR(ExpectFailure(s, "for 2 and holds "));
  RETURN_IF_ERROR(ExpectFailure(s, "run in other processes"));
  return run(1);
}

// A peer frozen (SIGSTOP) with a 2 MiB ppermute operand of this process waiting for it (its
// receive is posted only once the peer runs): process 0's run fails at the collective timeout,
// and its wait for that message to be taken ends at the distributed timeout (4 s here) while the
// peer is still frozen (process 0 resumes it, SIGCONT, only once its run has returned); the message
// stays posted, and once the peer is back a run of both processes works. The peer's own second run
// may fail (process 0 told it so).
absl::Status RunWithAFrozenPeer(const std::shared_ptr<ProcessGroup>& group) {
  const int self = group->process_id();
  auto ppermute_of = [&](absl::Duration timeout) -> absl::Status {
    Runtime rt({.num_devices = 1, .collective_timeout = timeout, .processes = group});
    absl::StatusOr<Mesh> mesh = JobMesh(rt, "rows");
    if (!mesh.ok()) return mesh.status();
    std::vector<double> v(2 * 4 * (128 << 10), 1.0);
    absl::StatusOr<Array> x = device_put(HostTensor(DType::kF32, {2, 4, 128 << 10}, v),
                                         NamedSharding(*mesh, Stacked()));
    if (!x.ok()) return x.status();
    return jit(shard_map(
        [](Tracer b) {
          return lax::ppermute(b, "x", {{0, 1}, {1, 0}});
        },
        *mesh, {Stacked()}, {Stacked()}, /*check_vma=*/false))(*x)
        .status();
  };
  if (absl::Status s = ppermute_of(absl::Seconds(30)); !s.ok()) return s;
  if (self == 1) {
    WriteMarker("frozen_peer.pid", absl::StrCat(getpid()));  // process 0 waits for the stop
    raise(SIGSTOP);  // until process 0's run has returned
    ppermute_of(absl::Seconds(30)).IgnoreError();
  } else {
    // Waits until the peer is stopped: its pid, then its state.
    absl::StatusOr<std::string> text = WaitForMarker("frozen_peer.pid", absl::Seconds(30));
    if (!text.ok()) return text.status();
    int peer = 0;
    if (!absl::SimpleAtoi(*text, &peer)) return absl::InternalError("bad pid " + *text);
    // Whatever happens below, the peer is resumed when this scope ends.
    const absl::Cleanup resume = [peer] { kill(peer, SIGCONT); };
    const absl::Time stop_deadline = absl::Now() + absl::Seconds(30);
    while (ProcessState(peer) != 'T') {
      if (absl::Now() > stop_deadline) {
        return absl::InternalError(
            absl::StrCat("process 1 (pid ", peer, ") not stopped after 30 s"));
      }
      std::this_thread::yield();
    }
    // Should the run not end at its deadlines, the peer is resumed after 12 s so that it does end
    // (and the time check below names it) instead of waiting forever.
    absl::Notification returned;
    std::thread backstop([&] {
      if (!returned.WaitForNotificationWithTimeout(absl::Seconds(12))) kill(peer, SIGCONT);
    });
    const absl::Time start = absl::Now();
    absl::Status s = ppermute_of(absl::Seconds(1));
    const absl::Duration took = absl::Now() - start;
    returned.Notify();
    backstop.join();
    if (s.ok()) return absl::InternalError("a run with a frozen peer succeeded");
    if (took > absl::Seconds(9)) {
      return absl::InternalError(absl::StrCat("the run with a frozen peer took ",
                                              absl::FormatDuration(took), ": ", s.ToString()));
    }
  }
  return ppermute_of(absl::Seconds(30));
}

absl::Status ChildMain(const std::string& role, int id) {
  if (role == "never_joins" && id == 1) return absl::OkStatus();  // never initialises
  if (role == "file_store") {
    setenv("SHARDJIT_STORE_DIR", (Env("TEST_TMPDIR") + "/store").c_str(), 1);
    unsetenv("SHARDJIT_COORDINATOR");
  }
  if (role == "frozen_peer") setenv("SHARDJIT_DISTRIBUTED_TIMEOUT", "4", 1);
  // Process 0 waits the whole join timeout for the process that never comes.
  if (role == "never_joins") setenv("SHARDJIT_DISTRIBUTED_TIMEOUT", "2", 1);
  absl::StatusOr<std::shared_ptr<ProcessGroup>> group = distributed::initialize();
  if (role == "never_joins") return ExpectFailure(group.status(), "processes [1] did not join");
  if (!group.ok()) return group.status();
  if (*group == nullptr) return absl::InternalError("SHARDJIT_NUM_PROCESSES is not set");
  if (role == "collectives" || role == "file_store") return CheckCollectives(*group);
  if (role == "seed") return CheckSeedVariants(*group);
  if (role == "kernels") return CheckKernels(*group);
  if (role == "training") return CheckTraining(*group);
  if (role == "killed") {
    absl::Status s = ExpectFailure(RunOnePsum(*group, "psum", absl::Seconds(30), /*die=*/true),
                                   "process 1 (devices [1]) failed");
    // The survivors leave together: one that left early would be what a slower one's run
    // reports first, instead of process 1's death.
    WriteMarker(absl::StrCat("killed.", id), "");
    for (int other = 0; other < (*group)->num_processes(); ++other) {
      if (other == 1) continue;
      absl::Status done = WaitForMarker(absl::StrCat("killed.", other), absl::Seconds(30)).status();
      if (s.ok() && !done.ok()) s = done;
    }
    return s;
  }
  if (role == "hangs") {
    if (id == 1) {  // runs nothing; leaves once process 0 gave up
      return WaitForMarker("hangs.gave_up", absl::Seconds(60)).status();
    }
    absl::Status s = RunOnePsum(*group, "psum", absl::Seconds(1));
    WriteMarker("hangs.gave_up", "");
    return ExpectFailure(s, "(run by process 1)");
  }
  if (role == "mismatch_large") return RunMismatchedLargePsum(*group);
  if (role == "many_messages") return RunManyMessages(*group);
  if (role == "frozen_peer") return RunWithAFrozenPeer(*group);
  if (role == "kernel_waits") return RunKernelThatWaitsTooLong(*group);
  if (role == "mismatch") {
    return ExpectFailure(RunOnePsum(*group, id == 1 ? "pmax" : "psum", absl::Seconds(30)),
                         "mismatch");
  }
  return absl::InvalidArgumentError("unknown role " + role);
}

int RunChild() {
  const int id = EnvInt("SHARDJIT_PROCESS_ID");
  absl::Status s = ChildMain(Env(kRole), id);
  std::ofstream(ResultPath(id)) << (s.ok() ? "ok" : s.ToString());
  if (!s.ok()) std::fprintf(stderr, "process %d: %s\n", id, s.ToString().c_str());
  return s.ok() ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// Parent side
// ---------------------------------------------------------------------------------------------

struct Job {
  int status = -1;
  std::string output;
  std::vector<std::string> results;  // per process
};

Job Launch(const std::string& role, int processes, int local_devices, const std::string& layout,
           absl::Duration timeout = absl::Seconds(120)) {
  for (int p = 0; p < processes; ++p) std::remove(ResultPath(p).c_str());
  for (const char* marker : kMarkers) std::remove(MarkerPath(marker).c_str());
  setenv(kRole, role.c_str(), 1);
  setenv(kLocal, std::to_string(local_devices).c_str(), 1);
  setenv(kLayout, layout.c_str(), 1);
  setenv("SHARDJIT_DISTRIBUTED_TIMEOUT", "10", 1);
  runtime::LaunchOptions options;
  options.num_processes = processes;
  options.timeout = timeout;
  options.grace = absl::Seconds(20);
  options.argv = {"/proc/self/exe"};
  std::ostringstream out;
  Job job;
  absl::StatusOr<int> status = runtime::Launch(options, out, out);
  job.status = status.ok() ? *status : -1;
  job.output = out.str() + (status.ok() ? "" : status.status().ToString());
  for (int p = 0; p < processes; ++p) {
    std::ifstream in(ResultPath(p));
    std::stringstream text;
    text << in.rdbuf();
    job.results.push_back(text.str());
  }
  unsetenv(kRole);
  return job;
}

struct Shape {
  int processes;
  int local_devices;
  const char* layout;
};

// Runs `role` as the job `s` and expects every process to report "ok".
void ExpectEveryProcessOk(const std::string& role, const Shape& s) {
  Job job = Launch(role, s.processes, s.local_devices, s.layout);
  EXPECT_EQ(job.status, 0) << job.output;
  for (int p = 0; p < s.processes; ++p) EXPECT_EQ(job.results[p], "ok") << "process " << p;
}

std::string ShapeName(const ::testing::TestParamInfo<Shape>& info) {
  return absl::StrCat(info.param.processes, "x", info.param.local_devices, "_",
                      info.param.layout);
}

class MultiprocessCollectives : public ::testing::TestWithParam<Shape> {};

TEST_P(MultiprocessCollectives, BitwiseEqualToOneProcess) {
  ExpectEveryProcessOk("collectives", GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, MultiprocessCollectives,
    ::testing::Values(Shape{2, 1, "rows"},   // {x:2, y:1}: x across 2 processes
                      Shape{2, 2, "rows"},   // {x:2, y:2}: x across processes, y within
                      Shape{2, 2, "cols"},   // {x:2, y:2}: y across processes, x within
                      Shape{4, 1, "rows"}),  // {x:2, y:2}: every axis across 4 processes
    ShapeName);

class MultiprocessSeedVariants : public ::testing::TestWithParam<Shape> {};

TEST_P(MultiprocessSeedVariants, MatchOneProcessAndF64) {
  ExpectEveryProcessOk("seed", GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, MultiprocessSeedVariants,
    ::testing::Values(Shape{2, 2, "rows"},   // seed_matmul --processes=2: x across processes
                      Shape{2, 2, "cols"},   // y across processes
                      Shape{4, 1, "rows"}),  // seed_matmul --processes=4 on a 2x2 mesh
    ShapeName);

class MultiprocessKernels : public ::testing::TestWithParam<Shape> {};

TEST_P(MultiprocessKernels, RemoteCopiesAndSemaphoresMatchOneProcess) {
  ExpectEveryProcessOk("kernels", GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, MultiprocessKernels,
    ::testing::Values(Shape{2, 2, "rows"},   // x across processes, y within
                      Shape{2, 2, "cols"},   // y across processes, x within
                      Shape{4, 1, "rows"}),  // every axis across 4 processes
    ShapeName);

TEST_P(MultiprocessKernels, TrainingStepsMatchOneProcess) {
  ExpectEveryProcessOk("training", GetParam());
}

TEST(Multiprocess, FileStore) { ExpectEveryProcessOk("file_store", Shape{2, 2, "rows"}); }

TEST(Multiprocess, AKilledProcessFailsTheOthersNamingIt) {
  const absl::Time start = absl::Now();
  Job job = Launch("killed", 4, 1, "rows");
  EXPECT_EQ(job.status, 128 + SIGKILL) << job.output;  // process 1's death is the first failure
  for (int p : {0, 2, 3}) EXPECT_EQ(job.results[p], "ok") << "process " << p << job.output;
  EXPECT_LT(absl::Now() - start, absl::Seconds(25)) << "not at once: " << job.output;
}

TEST(Multiprocess, AProcessThatNeverJoinsIsNamed) {
  Job job = Launch("never_joins", 2, 1, "rows");
  EXPECT_EQ(job.status, 0) << job.output;
  EXPECT_EQ(job.results[0], "ok") << job.output;
}

TEST(Multiprocess, AHangingProcessFailsTheRunAtTheCollectiveTimeout) {
  Job job = Launch("hangs", 2, 1, "rows");
  EXPECT_EQ(job.status, 0) << job.output;
  EXPECT_EQ(job.results[0], "ok") << job.output;
}

TEST(Multiprocess, AMismatchedProgramIsNamedInEveryProcess) {
  Job job = Launch("mismatch", 2, 1, "rows");
  EXPECT_EQ(job.status, 0) << job.output;
  for (int p = 0; p < 2; ++p) EXPECT_EQ(job.results[p], "ok") << "process " << p << job.output;
}

TEST(Multiprocess, AMismatchOfLargeOperandsIsNamedAndTheNextRunWorks) {
  Job job = Launch("mismatch_large", 2, 1, "rows");
  EXPECT_EQ(job.status, 0) << job.output;
  for (int p = 0; p < 2; ++p) EXPECT_EQ(job.results[p], "ok") << "process " << p << job.output;
}

TEST(Multiprocess, ARunPostingManyMessagesCompletesThem) {
  ExpectEveryProcessOk("many_messages", Shape{2, 1, "rows"});
}

TEST(Multiprocess, AKernelWaitingForMoreThanItsPeerSignalsFailsAtTheTimeout) {
  ExpectEveryProcessOk("kernel_waits", Shape{2, 1, "rows"});
}

TEST(Multiprocess, AFrozenPeerEndsTheWaitForItAtTheTimeout) {
  ExpectEveryProcessOk("frozen_peer", Shape{2, 1, "rows"});
}

TEST(Multiprocess, BadCoordinatorsAreClearErrors) {
  DistributedOptions o;
  o.num_processes = 2;
  o.process_id = 1;
  o.coordinator = "no-port";
  EXPECT_TRUE(absl::StrContains(distributed::initialize(o).status().message(), "HOST:PORT"));
  absl::StatusOr<int> port = runtime::PickFreePort();
  ASSERT_TRUE(port.ok());
  o.coordinator = absl::StrCat("127.0.0.1:", *port);  // nobody serves it
  o.timeout = absl::Milliseconds(500);
  const absl::Time start = absl::Now();
  absl::Status s = distributed::initialize(o).status();
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), o.coordinator)) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  o.process_id = 2;
  EXPECT_TRUE(absl::IsInvalidArgument(distributed::initialize(o).status()));
}

}  // namespace
}  // namespace shardjit

int main(int argc, char** argv) {
  if (!shardjit::Env(shardjit::kRole).empty()) return shardjit::RunChild();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
