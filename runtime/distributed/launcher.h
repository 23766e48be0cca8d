// Runs one program as N cooperating processes on this host (tools/launch.cc is the command). Child
// i gets the launcher's environment plus SHARDJIT_NUM_PROCESSES=N, SHARDJIT_PROCESS_ID=i and
// SHARDJIT_COORDINATOR=127.0.0.1:PORT (process 0 serves a TCP store there), and, unless the
// environment sets it, SHARDJIT_NUM_THREADS: this process's cores divided among the children (at
// least 1 each), so that N runtimes on one host do not each start a thread per core. Each child
// runs in its own process group with stdin from /dev/null; its stdout and stderr lines are streamed
// to `out` and `err` prefixed by "[i] ", whole lines only (a last line without a newline gets one;
// a line over 1 MiB is cut into pieces). When a child fails, the others get a grace period to end
// by themselves, then SIGTERM and, after kill_delay, SIGKILL to their process groups. Children die
// with the forking thread (PR_SET_PDEATHSIG), and what is left in a child's process group when the
// child exits is killed.
#ifndef SHARDJIT_RUNTIME_DISTRIBUTED_LAUNCHER_H_
#define SHARDJIT_RUNTIME_DISTRIBUTED_LAUNCHER_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace shardjit::runtime {

struct LaunchOptions {
  int num_processes = 0;
  // The coordinator's port on 127.0.0.1; 0: a free one (bound to port 0, read, closed).
  int port = 0;
  // Past it, the children still running are stopped and the run returns 124.
  absl::Duration timeout = absl::InfiniteDuration();
  // How long the others may run on after the first failure before they are stopped.
  absl::Duration grace = absl::Seconds(10);
  // From SIGTERM to SIGKILL when stopping children.
  absl::Duration kill_delay = absl::Seconds(2);
  // Catch SIGINT and SIGTERM while the run lasts and pass them on to every child (the previous
  // handlers are restored at the end); a second one sends SIGKILL. Process-wide: one run at a
  // time.
  bool forward_signals = false;
  // The file descriptor `out` writes to, or -1: when its reader goes away (a pipe whose read end
  // closed) the children are stopped, as when writing to `out` fails. To see write failures
  // rather than die of SIGPIPE, ignore SIGPIPE.
  int output_fd = -1;
  // The program (looked up in PATH) and its arguments.
  std::vector<std::string> argv;
};

// Exit status of the first event that ended the run: 0 when every child exited 0; else the
// first failed child's (128+S for a signal S), 127 when the program cannot be executed (the
// message names errno; no further children are started), 124 for the timeout, 128+S for a
// forwarded signal S, 141 (as SIGPIPE) when the output closed. One line goes to `err` per
// failed child ("launch: process i exited with status s" / "... killed by signal SIGNAME") and
// per stopping event. Errors: InvalidArgument for bad options; the failed system call when a
// child cannot be started (children already started are killed first).
absl::StatusOr<int> Launch(const LaunchOptions& options, std::ostream& out, std::ostream& err);

// Runs this executable (/proc/self/exe) with `args` as `num_processes` processes of one job:
// Launch with the output on this process's stdout and stderr and SIGINT and SIGTERM forwarded.
// How a program starts itself as a job when asked to (e.g. seed_matmul --processes=N); its
// children tell themselves apart by SHARDJIT_NUM_PROCESSES being set.
absl::StatusOr<int> LaunchSelf(int num_processes, const std::vector<std::string>& args);

// A port on 127.0.0.1 that was free a moment ago.
absl::StatusOr<int> PickFreePort();

// "SIGKILL" for SIGKILL; "signal 77" when it has no name.
std::string SignalName(int sig);

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_DISTRIBUTED_LAUNCHER_H_
