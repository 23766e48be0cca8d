// Tests of the multi-process launcher with /bin/sh scripts as children: the environment each
// child sees, prefixed and complete output, exit statuses (first failure, signals, timeout, a
// program that cannot run), stopping children after the grace period, forwarded signals and a
// closed output; and LaunchSelf with this test program as the children (kSelfChild).
#include "runtime/distributed/launcher.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit::runtime {
namespace {

// argv[1] of this program started by LaunchSelf: it writes "<id> <processes> <argv[2]>" to
// argv[2]/<id> and exits with status argv[3].
constexpr char kSelfChild[] = "--launch-self-child";

using ::testing::HasSubstr;
using ::testing::Not;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

struct Result {
  absl::StatusOr<int> status;
  std::string out, err;
  absl::Duration elapsed;
};

// Runs `script` with /bin/sh -c in `n` processes.
Result RunShell(int n, const std::string& script, LaunchOptions options = {}) {
  options.num_processes = n;
  options.argv = {"/bin/sh", "-c", script};
  std::ostringstream out, err;
  absl::Time start = absl::Now();
  absl::StatusOr<int> status = Launch(options, out, err);
  return Result{std::move(status), out.str(), err.str(), absl::Now() - start};
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The pid a child wrote into `path`.
pid_t ReadPid(const std::string& path) {
  std::ifstream in(path);
  pid_t pid = -1;
  in >> pid;
  return pid;
}

// Whether `pid` is gone or a zombie (killed, waiting for a parent that is not this process).
bool GoneOrZombie(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return true;
  char buffer[512];
  ssize_t n = read(fd, buffer, sizeof(buffer));
  close(fd);
  if (n <= 0) return true;  // gone between open and read
  std::string text(buffer, n);
  size_t paren = text.rfind(')');
  return paren == std::string::npos || text.substr(paren + 2, 1) == "Z";
}

TEST(LauncherTest, EachChildSeesItsIdAndTheSameCoordinator) {
  setenv("SHARDJIT_PROCESS_ID", "99", 1);  // replaced for the children
  setenv("LAUNCHER_TEST_INHERITED", "yes", 1);
  Result r = RunShell(4,
                      "echo \"id=$SHARDJIT_PROCESS_ID n=$SHARDJIT_NUM_PROCESSES "
                      "coordinator=$SHARDJIT_COORDINATOR inherited=$LAUNCHER_TEST_INHERITED\"");
  unsetenv("SHARDJIT_PROCESS_ID");
  unsetenv("LAUNCHER_TEST_INHERITED");
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(*r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  std::set<int> ids;
  std::set<std::string> coordinators;
  for (const std::string& line : lines) {
    int prefix = -1, id = -1, n = -1;
    char coordinator[64] = {}, inherited[16] = {};
    ASSERT_EQ(sscanf(line.c_str(), "[%d] id=%d n=%d coordinator=%63s inherited=%15s", &prefix, &id,
                     &n, coordinator, inherited),
              5)
        << line;
    EXPECT_EQ(prefix, id) << line;
    EXPECT_EQ(n, 4) << line;
    EXPECT_EQ(std::string(inherited), "yes") << line;
    ids.insert(id);
    coordinators.insert(coordinator);
  }
  EXPECT_EQ(ids, (std::set<int>{0, 1, 2, 3}));
  ASSERT_EQ(coordinators.size(), 1u);
  const std::string& coordinator = *coordinators.begin();
  ASSERT_THAT(coordinator, ::testing::StartsWith("127.0.0.1:"));
  int port = std::atoi(coordinator.substr(10).c_str());
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

TEST(LauncherTest, FixedPortIsTheCoordinator) {
  LaunchOptions options;
  options.port = 43211;
  Result r = RunShell(2, "echo \"$SHARDJIT_COORDINATOR\"", options);
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(*r.status, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"[0] 127.0.0.1:43211", "[1] 127.0.0.1:43211"}));
}

TEST(LauncherTest, ChildrenShareTheCoresUnlessThreadsAreSet) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int share = std::max(1, CPU_COUNT(&set) / 3);
  unsetenv("SHARDJIT_NUM_THREADS");
  Result shared = RunShell(3, "echo \"$SHARDJIT_NUM_THREADS\"");
  ASSERT_TRUE(shared.status.ok()) << shared.status.status();
  EXPECT_EQ(Lines(shared.out).size(), 3u) << shared.out;
  for (const std::string& line : Lines(shared.out)) {
    EXPECT_EQ(line.substr(4), std::to_string(share)) << line;
  }
  setenv("SHARDJIT_NUM_THREADS", "5", 1);
  Result given = RunShell(2, "echo \"$SHARDJIT_NUM_THREADS\"");
  unsetenv("SHARDJIT_NUM_THREADS");
  ASSERT_TRUE(given.status.ok()) << given.status.status();
  EXPECT_THAT(Lines(given.out), ::testing::UnorderedElementsAre("[0] 5", "[1] 5"));
}

TEST(LauncherTest, OutputIsPrefixedAndComplete) {
  constexpr int kProcesses = 3, kLines = 2000, kLongLine = 200000;
  Result r = RunShell(kProcesses, R"(
    i=0
    while [ $i -lt 2000 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done
    head -c 200000 /dev/zero | tr '\0' x; echo
    printf 'out tail'; printf 'err tail' >&2)");
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(*r.status, 0) << r.err.substr(0, 1000);
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.back(), '\n');
  EXPECT_EQ(r.err.back(), '\n');

  // Per process, its lines in order.
  std::map<int, std::vector<std::string>> out, err;
  for (auto [text, by_process] : {std::pair{&r.out, &out}, std::pair{&r.err, &err}}) {
    for (const std::string& line : Lines(*text)) {
      ASSERT_GE(line.size(), 4u) << line;
      ASSERT_EQ(line[0], '[') << line;
      int p = line[1] - '0';
      ASSERT_TRUE(p >= 0 && p < kProcesses) << line;
      ASSERT_EQ(line.substr(2, 2), "] ") << line.substr(0, 100);
      (*by_process)[p].push_back(line.substr(4));
    }
  }
  for (int p = 0; p < kProcesses; ++p) {
    std::vector<std::string> want_out, want_err;
    for (int i = 0; i < kLines; ++i) {
      want_out.push_back("out " + std::to_string(i));
      want_err.push_back("err " + std::to_string(i));
    }
    want_out.push_back(std::string(kLongLine, 'x'));
    want_out.push_back("out tail");
    want_err.push_back("err tail");
    EXPECT_TRUE(out[p] == want_out) << "process " << p << ": " << out[p].size() << " lines";
    EXPECT_TRUE(err[p] == want_err) << "process " << p << ": " << err[p].size() << " lines";
  }
}

TEST(LauncherTest, FirstFailureWins) {
  Result r = RunShell(2, R"(
    if [ "$SHARDJIT_PROCESS_ID" = 1 ]; then exit 3; fi
    sleep 0.5; exit 5)");
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(*r.status, 3);
  EXPECT_THAT(r.err, HasSubstr("launch: process 1 exited with status 3\n"));
  EXPECT_THAT(r.err, HasSubstr("launch: process 0 exited with status 5\n"));
  EXPECT_THAT(r.err, Not(HasSubstr("stopping")));  // process 0 ended by itself
  EXPECT_GE(r.elapsed, absl::Milliseconds(450));
  EXPECT_LT(r.elapsed, absl::Seconds(5));
}

TEST(LauncherTest, HangingChildIsStoppedAfterTheGracePeriod) {
  const std::string pid_file = TempPath("hanging.pid");
  const std::string script = "pid_file='" + pid_file + "'" + R"(
    if [ "$SHARDJIT_PROCESS_ID" = 0 ]; then echo $$ > "$pid_file"; exec sleep 60; fi
    sleep 0.2; exit 4)";
  LaunchOptions options;
  options.grace = absl::Milliseconds(500);
  Result r = RunShell(2, script, options);
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(*r.status, 4);
  EXPECT_THAT(r.err, HasSubstr("launch: process 1 exited with status 4\n"));
  EXPECT_THAT(r.err, HasSubstr("launch: 1 process still running 500ms after the first failure"));
  EXPECT_THAT(r.err, HasSubstr("launch: process 0 killed by signal SIGTERM\n"));
  EXPECT_GE(r.elapsed, absl::Milliseconds(650));
  EXPECT_LT(r.elapsed, absl::Seconds(5));
  pid_t pid = ReadPid(pid_file);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(LauncherTest, ChildIgnoringSigtermIsKilled) {
  const std::string pid_file = TempPath("stubborn.pid");
  const std::string script = "pid_file='" + pid_file + "'" + R"(
    if [ "$SHARDJIT_PROCESS_ID" = 1 ]; then exit 1; fi
    trap '' TERM
    echo $$ > "$pid_file"
    while :; do sleep 0.05; done)";
  LaunchOptions options;
  options.grace = absl::Milliseconds(200);
  options.kill_delay = absl::Milliseconds(300);
  Result r = RunShell(2, script, options);
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(*r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("after SIGTERM; sending SIGKILL\n"));
  EXPECT_THAT(r.err, HasSubstr("launch: process 0 killed by signal SIGKILL\n"));
  EXPECT_GE(r.elapsed, absl::Milliseconds(450));
  EXPECT_LT(r.elapsed, absl::Seconds(5));
  pid_t pid = ReadPid(pid_file);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(LauncherTest, TimeoutReturns124) {
  LaunchOptions options;
  options.timeout = absl::Milliseconds(500);
  Result r = RunShell(2, "echo started; exec sleep 30", options);
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(*r.status, 124);
  EXPECT_THAT(r.out, HasSubstr("[0] started\n"));
  EXPECT_THAT(r.out, HasSubstr("[1] started\n"));
  EXPECT_THAT(r.err, HasSubstr("launch: timed out after 500ms; stopping 2 processes\n"));
  EXPECT_GE(r.elapsed, absl::Milliseconds(450));
  EXPECT_LT(r.elapsed, absl::Seconds(5));
}

TEST(LauncherTest, ProgramThatCannotRunReturns127) {
  LaunchOptions options;
  options.num_processes = 3;
  options.argv = {"/nonexistent/program", "arg"};
  std::ostringstream out, err;
  absl::StatusOr<int> status = Launch(options, out, err);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 127);
  EXPECT_EQ(err.str(),
            "launch: process 0: cannot run /nonexistent/program: No such file or directory\n");
  EXPECT_EQ(out.str(), "");
}

TEST(LauncherTest, ChildKilledBySignalCountsAs128PlusSignal) {
  Result r = RunShell(1, "kill -9 $$");
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(*r.status, 137);
  EXPECT_EQ(r.err, "launch: process 0 killed by signal SIGKILL\n");
}

TEST(LauncherTest, SigtermIsForwardedAndHandlersRestored) {
  LaunchOptions options;
  options.forward_signals = true;
  // Process 0 sends SIGTERM to the launcher (this test), which passes it on.
  const std::string script = R"(
    trap 'echo "got TERM"; exit 7' TERM
    if [ "$SHARDJIT_PROCESS_ID" = 0 ]; then kill -TERM $PPID; fi
    sleep 30 & wait)";
  Result r = RunShell(2, script, options);
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(*r.status, 128 + SIGTERM);
  EXPECT_THAT(r.out, HasSubstr("[0] got TERM\n"));
  EXPECT_THAT(r.err, HasSubstr("launch: got SIGTERM; passing it on to the processes\n"));
  EXPECT_THAT(r.err, HasSubstr("launch: process 0 exited with status 7\n"));
  EXPECT_LT(r.elapsed, absl::Seconds(5));
  struct sigaction action;
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &action), 0);
  EXPECT_EQ(action.sa_handler, SIG_DFL);
}

TEST(LauncherTest, FailingOutputStreamStopsChildren) {
  LaunchOptions options;
  options.num_processes = 2;
  options.argv = {"/bin/sh", "-c", "echo hello; exec sleep 30"};
  std::ostream closed(nullptr);  // every write fails
  std::ostringstream err;
  absl::Time start = absl::Now();
  absl::StatusOr<int> status = Launch(options, closed, err);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 128 + SIGPIPE);
  EXPECT_THAT(err.str(), HasSubstr("launch: the output was closed; stopping the processes\n"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(LauncherTest, ClosedOutputPipeStopsQuietChildren) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);  // nobody reads the output any more
  LaunchOptions options;
  options.output_fd = fds[1];
  Result r = RunShell(2, "exec sleep 30", options);
  close(fds[1]);
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(*r.status, 128 + SIGPIPE);
  EXPECT_THAT(r.err, HasSubstr("launch: the output was closed"));
  EXPECT_LT(r.elapsed, absl::Seconds(5));
}

TEST(LauncherTest, WhatAChildLeavesInItsProcessGroupIsKilled) {
  const std::string pid_file = TempPath("leftover.pid");
  Result r = RunShell(1, "sleep 30 & echo $! > '" + pid_file + "'; echo done");
  ASSERT_TRUE(r.status.ok()) << r.status.status();
  EXPECT_EQ(*r.status, 0) << r.err;
  EXPECT_EQ(r.out, "[0] done\n");
  EXPECT_LT(r.elapsed, absl::Seconds(5));  // the sleep holding the pipes is not waited for
  pid_t pid = ReadPid(pid_file);
  ASSERT_GT(pid, 0);
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = GoneOrZombie(pid);
    if (!gone) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(gone) << "pid " << pid;
}

TEST(LauncherTest, BadOptionsAreRejected) {
  std::ostringstream out, err;
  LaunchOptions options;
  options.argv = {"/bin/true"};
  options.num_processes = 0;
  EXPECT_EQ(Launch(options, out, err).status().code(), absl::StatusCode::kInvalidArgument);
  options.num_processes = 1;
  options.grace = absl::Seconds(-1);
  EXPECT_EQ(Launch(options, out, err).status().code(), absl::StatusCode::kInvalidArgument);
  options.grace = absl::Seconds(1);
  options.port = 70000;
  EXPECT_EQ(Launch(options, out, err).status().code(), absl::StatusCode::kInvalidArgument);
  options.port = 0;
  options.argv.clear();
  absl::StatusOr<int> status = Launch(options, out, err);
  EXPECT_EQ(status.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.status().message(), HasSubstr("no program"));
}

TEST(LauncherTest, LaunchSelfRunsThisProgramWithItsArguments) {
  const std::string dir = TempPath("launch_self");
  ASSERT_TRUE(mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST);
  absl::StatusOr<int> status = LaunchSelf(3, {kSelfChild, dir, "0"});
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 0);
  for (int i = 0; i < 3; ++i) {
    std::ifstream in(dir + "/" + std::to_string(i));
    int id = -1, processes = 0;
    std::string arg;
    in >> id >> processes >> arg;
    EXPECT_EQ(id, i);
    EXPECT_EQ(processes, 3);
    EXPECT_EQ(arg, dir);
  }
  status = LaunchSelf(2, {kSelfChild, dir, "3"});
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 3);  // the first failed child's status
}

TEST(LauncherTest, SignalNames) {
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
}

}  // namespace
}  // namespace shardjit::runtime

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == shardjit::runtime::kSelfChild) {
    const char* id = std::getenv("SHARDJIT_PROCESS_ID");
    const char* processes = std::getenv("SHARDJIT_NUM_PROCESSES");
    if (id == nullptr || processes == nullptr) return 2;
    std::ofstream(std::string(argv[2]) + "/" + id) << id << " " << processes << " " << argv[2];
    return std::atoi(argv[3]);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
