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
#include <string_view>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/time/time.h"
#include "fmt/format.h"
#include "runtime/distributed/launcher.h"
#include "tools/flags.h"

ABSL_FLAG(std::optional<int>, n, std::nullopt,
          "run N processes (SHARDJIT_PROCESS_ID=0..N-1, SHARDJIT_NUM_PROCESSES=N); required");
ABSL_FLAG(std::optional<int>, port, std::nullopt,
          "the coordinator's port on 127.0.0.1 (SHARDJIT_COORDINATOR; default: a free one)");
ABSL_FLAG(std::optional<double>, timeout, std::nullopt,
          "stop all processes after this many seconds and exit with 124 (default: none)");
ABSL_FLAG(double, grace, 10,
          "after a process fails, let the others run this many seconds more before they are "
          "stopped with SIGTERM, then SIGKILL 2 s later");

namespace shardjit::tools {
namespace {

using runtime::LaunchOptions;

constexpr int kLauncherError = 125;

constexpr char kUsage[] =
    "usage: launch -n N [--port=P] [--timeout=SECONDS] [--grace=SECONDS] -- PROGRAM ARGS...\n"
    "  -n N         run N processes (SHARDJIT_PROCESS_ID=0..N-1, SHARDJIT_NUM_PROCESSES=N)\n"
    "  --port=P     the coordinator's port on 127.0.0.1 (SHARDJIT_COORDINATOR; default: free)\n"
    "  --timeout=S  stop all processes after S seconds and exit with 124 (default: none)\n"
    "  --grace=S    after a process fails, let the others run S seconds more before they are\n"
    "               stopped with SIGTERM, then SIGKILL 2 s later (default: 10)\n"
    "The launcher's flags end at \"--\" or at the first argument that is neither a flag nor a\n"
    "flag's value; PROGRAM and its ARGS are passed on untouched.\n"
    "exit status: 0 when all processes exit 0; else the first failure's (128+S for a signal S),\n"
    "  124 on timeout, 127 when PROGRAM cannot be run, 125 bad usage or a launcher error\n";

int UsageError(const std::string& message) {
  fmt::print(stderr, "launch: {}\n{}", message, kUsage);
  return kLauncherError;
}

// Seconds as a Duration: finite, positive (or zero where allowed).
std::optional<absl::Duration> ToDuration(double seconds, bool allow_zero) {
  if (!std::isfinite(seconds) || seconds < 0 || (seconds == 0 && !allow_zero)) {
    return std::nullopt;
  }
  return absl::Seconds(seconds);
}

// Where PROGRAM starts in argv: after "--", or at the first argument that is neither a flag nor
// the value of a flag given as "-n N" (a flag that takes a value and has no "="). The launcher's
// own arguments are argv[0, *flags_end).
int ProgramStart(int argc, char** argv, int* flags_end) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      *flags_end = i;
      return i + 1;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      *flags_end = i;
      return i;
    }
    arg.remove_prefix(arg.starts_with("--") ? 2 : 1);
    if (arg.find('=') != std::string_view::npos) continue;
    const absl::CommandLineFlag* flag =
        absl::FindCommandLineFlag(absl::string_view(arg.data(), arg.size()));
    if (flag != nullptr && !flag->IsOfType<bool>()) ++i;  // its value
  }
  *flags_end = argc;
  return argc;
}

// The flags into `options` (all but argv); returns an error message for bad flags.
std::optional<std::string> ReadFlags(LaunchOptions& options) {
  const std::optional<int> n = absl::GetFlag(FLAGS_n);
  if (!n) return std::string("missing -n N");
  if (*n < 1) return fmt::format("-n must be a positive integer, got \"{}\"", *n);
  options.num_processes = *n;
  if (const std::optional<int> port = absl::GetFlag(FLAGS_port)) {
    if (*port < 1 || *port > 65535) {
      return fmt::format("--port must be in 1..65535, got \"{}\"", *port);
    }
    options.port = *port;
  }
  if (const std::optional<double> timeout = absl::GetFlag(FLAGS_timeout)) {
    std::optional<absl::Duration> d = ToDuration(*timeout, /*allow_zero=*/false);
    if (!d) {
      return fmt::format("--timeout must be a positive number of seconds, got \"{}\"", *timeout);
    }
    options.timeout = *d;
  }
  std::optional<absl::Duration> grace = ToDuration(absl::GetFlag(FLAGS_grace), /*allow_zero=*/true);
  if (!grace) {
    return fmt::format("--grace must be a number of seconds (0 or more), got \"{}\"",
                       absl::GetFlag(FLAGS_grace));
  }
  options.grace = *grace;
  return std::nullopt;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  // Only the launcher's own arguments go to the flags parser: PROGRAM's are not its business.
  int flags_end = argc;
  const int program = ProgramStart(argc, argv, &flags_end);
  ParseCommandLine(flags_end, argv, kLauncherError);
  LaunchOptions options;
  if (std::optional<std::string> error = ReadFlags(options)) return UsageError(*error);
  options.argv.assign(argv + program, argv + argc);
  if (options.argv.empty()) return UsageError("no PROGRAM to run");
  options.forward_signals = true;
  // A closed stdout shows as a failed write (not SIGPIPE) or as POLLERR on fd 1; either way the
  // children are stopped.
  signal(SIGPIPE, SIG_IGN);
  options.output_fd = STDOUT_FILENO;
  absl::StatusOr<int> status = runtime::Launch(options, std::cout, std::cerr);
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
