// launch: runs one program as N cooperating processes on this host, like `mpirun -n N`.
//
//   launch -n N [--port=P] [--timeout=S] [--grace=S] -- PROGRAM ARGS...
//
// Process i gets SHARDJIT_NUM_PROCESSES=N, SHARDJIT_PROCESS_ID=i (0..N-1) and
// SHARDJIT_COORDINATOR=127.0.0.1:PORT, where process 0 serves the TCP store the others join,
// and SHARDJIT_NUM_THREADS=cores/N unless set (the processes share this host's cores).
// Output lines come out prefixed by "[i] "; the exit status is the first failure's. On several
// hosts, start one process per host (or per task) by hand with the three variables set, the
// coordinator being host 0's address: e.g. under Slurm, SHARDJIT_NUM_PROCESSES=$SLURM_NTASKS
// SHARDJIT_PROCESS_ID=$SLURM_PROCID SHARDJIT_COORDINATOR=<first host of the job>:PORT.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/time.h"
#include "fmt/format.h"
#include "tools/launcher.h"

namespace shardjit::tools {
namespace {

constexpr int kLauncherError = 125;

constexpr char kUsage[] =
    "usage: launch -n N [--port=P] [--timeout=SECONDS] [--grace=SECONDS] -- PROGRAM ARGS...\n"
    "  -n N         run N processes (SHARDJIT_PROCESS_ID=0..N-1, SHARDJIT_NUM_PROCESSES=N)\n"
    "  --port=P     the coordinator's port on 127.0.0.1 (SHARDJIT_COORDINATOR; default: free)\n"
    "  --timeout=S  stop all processes after S seconds and exit with 124 (default: none)\n"
    "  --grace=S    after a process fails, let the others run S seconds more before they are\n"
    "               stopped with SIGTERM, then SIGKILL 2 s later (default: 10)\n"
    "exit status: 0 when all processes exit 0; else the first failure's (128+S for a signal S),\n"
    "  124 on timeout, 127 when PROGRAM cannot be run, 125 bad usage or a launcher error\n";

int UsageError(const std::string& message) {
  fmt::print(stderr, "launch: {}\n{}", message, kUsage);
  return kLauncherError;
}

// Seconds as a Duration: finite, positive (or zero where allowed).
std::optional<absl::Duration> ParseSeconds(const std::string& text, bool allow_zero) {
  double seconds;
  if (!absl::SimpleAtod(text, &seconds) || !std::isfinite(seconds) || seconds < 0 ||
      (seconds == 0 && !allow_zero)) {
    return std::nullopt;
  }
  return absl::Seconds(seconds);
}

// Flags up to "--" or the first argument not starting with '-'; the rest is the program.
std::optional<std::string> ParseFlags(int argc, char** argv, LaunchOptions& options, bool& help) {
  bool has_n = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (!absl::StartsWith(arg, "-")) break;
    if (arg == "-h" || arg == "--help") {
      help = true;
      return std::nullopt;
    }
    if (arg == "-n" || absl::StartsWith(arg, "-n=")) {
      std::string value;
      if (arg == "-n") {
        if (++i == argc) return std::string("-n needs a number of processes");
        value = argv[i];
      } else {
        value = arg.substr(3);
      }
      if (!absl::SimpleAtoi(value, &options.num_processes) || options.num_processes < 1) {
        return fmt::format("-n must be a positive integer, got \"{}\"", value);
      }
      has_n = true;
    } else if (absl::StartsWith(arg, "--port=")) {
      if (!absl::SimpleAtoi(arg.substr(7), &options.port) || options.port < 1 ||
          options.port > 65535) {
        return fmt::format("--port must be in 1..65535, got \"{}\"", arg.substr(7));
      }
    } else if (absl::StartsWith(arg, "--timeout=")) {
      std::optional<absl::Duration> d = ParseSeconds(arg.substr(10), /*allow_zero=*/false);
      if (!d) {
        return fmt::format("--timeout must be a positive number of seconds, got \"{}\"",
                           arg.substr(10));
      }
      options.timeout = *d;
    } else if (absl::StartsWith(arg, "--grace=")) {
      std::optional<absl::Duration> d = ParseSeconds(arg.substr(8), /*allow_zero=*/true);
      if (!d) {
        return fmt::format("--grace must be a number of seconds (0 or more), got \"{}\"",
                           arg.substr(8));
      }
      options.grace = *d;
    } else {
      return fmt::format("unknown flag {}", arg);
    }
  }
  if (!has_n) return std::string("missing -n N");
  for (; i < argc; ++i) options.argv.push_back(argv[i]);
  if (options.argv.empty()) return std::string("no PROGRAM to run");
  return std::nullopt;
}

int Main(int argc, char** argv) {
  LaunchOptions options;
  bool help = false;
  if (std::optional<std::string> error = ParseFlags(argc, argv, options, help)) {
    return UsageError(*error);
  }
  if (help) {
    fmt::print("{}", kUsage);
    return 0;
  }
  options.forward_signals = true;
  // A closed stdout shows as a failed write (not SIGPIPE) or as POLLERR on fd 1; either way the
  // children are stopped.
  signal(SIGPIPE, SIG_IGN);
  options.output_fd = STDOUT_FILENO;
  absl::StatusOr<int> status = Launch(options, std::cout, std::cerr);
  if (!status.ok()) {
    if (absl::IsInvalidArgument(status.status())) {
      return UsageError(std::string(status.status().message()));
    }
    fmt::print(stderr, "launch: error: {}\n", std::string(status.status().message()));
    return kLauncherError;
  }
  return *status;
}

}  // namespace
}  // namespace shardjit::tools

int main(int argc, char** argv) { return shardjit::tools::Main(argc, argv); }
