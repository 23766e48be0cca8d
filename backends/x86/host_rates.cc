#include "backends/x86/host_rates.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/gemm.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/dtype.h"
#include "ir/fmt_absl.h"

namespace shardjit::backends::x86 {
namespace {

// Seconds of the fastest of `runs` calls of `f`, after one unmeasured call.
template <typename F>
double BestSeconds(int runs, F f) {
  f();
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return std::max(best, 1e-9);
}

// `rate` rounded down to a power of 2^(1/4): measurements that differ by less than a class
// usually give the same figure.
double RoundToClass(double rate) {
  if (!(rate > 0)) return rate;
  return std::exp2(std::floor(std::log2(rate) * 4) / 4);
}

// "<vendor>-<family>-<model>-<isa>", e.g. "AuthenticAMD-25-17-avx512_bf16": the file of one
// kind of CPU.
std::string CpuKey() {
  const CpuIdentity& cpu = HostCpu();
  return fmt::format("{}-{}-{}-{}", cpu.vendor, cpu.family, cpu.model, IsaName(ActiveIsa()));
}

std::string DefaultPath() {
  std::string dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != 0) {
    dir = xdg;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != 0) {
    dir = std::string(home) + "/.cache";
  } else {
    dir = "/tmp";
  }
  return fmt::format("{}/shardjit/machine-model-{}.txt", dir, CpuKey());
}

std::string Format(const passes::MachineModel& m) {
  return fmt::format("flops_per_second={:a} bytes_per_second={:a} seconds_per_collective={:a}\n",
                     m.flops_per_second, m.bytes_per_second, m.seconds_per_collective);
}

absl::StatusOr<passes::MachineModel> Parse(const std::string& text, const std::string& path) {
  passes::MachineModel m;
  if (std::sscanf(text.c_str(), "flops_per_second=%la bytes_per_second=%la seconds_per_collective=%la",
                  &m.flops_per_second, &m.bytes_per_second, &m.seconds_per_collective) != 3 ||
      !(m.flops_per_second > 0) || !(m.bytes_per_second > 0) || !(m.seconds_per_collective >= 0)) {
    return absl::DataLossError(fmt::format(
        "machine model {}: expected \"flops_per_second=F bytes_per_second=B "
        "seconds_per_collective=S\" with positive rates, got \"{}\"",
        path, text.substr(0, text.find('\n'))));
  }
  m.source = path;
  return m;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("machine model {}: cannot be read", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Holds an exclusive lock on `path` + ".lock" while alive.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_;
};

}  // namespace

passes::MachineModel MeasureHostModel() {
  passes::MachineModel model;
  constexpr int64_t kN = 256;
  std::vector<uint16_t> a(kN * kN, ir::bf16::FromFloat(0.5f));
  std::vector<uint16_t> b(kN * kN, ir::bf16::FromFloat(2.0f));
  std::vector<float> c(kN * kN);
  GemmArgs g;
  g.shape = {kN, kN, kN};
  g.type = GemmType::kBf16Bf16F32;
  g.a = a.data();
  g.b = b.data();
  g.c = c.data();
  bool ok = true;
  const double gemm = BestSeconds(5, [&] { ok = ok && Gemm(g).ok(); });
  if (ok) model.flops_per_second = RoundToClass(2.0 * kN * kN * kN / gemm);
  constexpr size_t kBytes = size_t{4} << 20;
  std::vector<char> from(kBytes, 1), to(kBytes);
  const double copy = BestSeconds(3, [&] { std::memcpy(to.data(), from.data(), kBytes); });
  model.bytes_per_second = RoundToClass(kBytes / copy);
  model.source = "measured";
  return model;
}

absl::StatusOr<passes::MachineModel> LoadOrMeasureHostModel(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  FileLock lock(path);
  if (!lock.ok()) {
    return absl::PermissionDeniedError(
        fmt::format("machine model {}: cannot create {}.lock", path, path));
  }
  if (std::filesystem::exists(path, ec)) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    return Parse(text, path);
  }
  passes::MachineModel model = MeasureHostModel();
  const std::string temp = fmt::format("{}.{}.tmp", path, ::getpid());
  {
    std::ofstream out(temp);
    out << Format(model);
    if (!out) {
      return absl::PermissionDeniedError(fmt::format("machine model {}: cannot be written", path));
    }
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::filesystem::remove(temp, ec);
    return absl::PermissionDeniedError(fmt::format("machine model {}: cannot be written", path));
  }
  model.source = path;
  return model;
}

const passes::MachineModel& HostMachineModel() {
  static const passes::MachineModel* const model = [] {
    const char* env = std::getenv("SHARDJIT_MACHINE_MODEL");
    const std::string choice = env != nullptr ? env : "";
    if (choice == "defaults") return new passes::MachineModel();
    absl::StatusOr<passes::MachineModel> kept =
        LoadOrMeasureHostModel(choice.empty() ? DefaultPath() : choice);
    if (kept.ok()) return new passes::MachineModel(*kept);
    auto* measured = new passes::MachineModel(MeasureHostModel());
    measured->source = fmt::format("measured ({})", kept.status().message());
    return measured;
  }();
  return *model;
}

}  // namespace shardjit::backends::x86
