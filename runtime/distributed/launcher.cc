#include "runtime/distributed/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <climits>
#include <iostream>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"

extern char** environ;

namespace shardjit::runtime {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTimedOut = 124;
constexpr int kCannotRun = 127;
constexpr int kOutputClosed = 128 + SIGPIPE;
// A line longer than this without a newline is passed on in pieces.
constexpr size_t kMaxLine = size_t{1} << 20;
// How often children are checked for exit when pidfds are not available.
constexpr auto kTick = std::chrono::milliseconds(50);

constexpr const char* kEnvNames[] = {"SHARDJIT_NUM_PROCESSES", "SHARDJIT_PROCESS_ID",
                                     "SHARDJIT_COORDINATOR"};

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~Fd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

absl::Status Errno(const char* what) { return absl::ErrnoToStatus(errno, what); }

// A pipe whose ends close on exec.
absl::Status MakePipe(Fd& read_end, Fd& write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Errno("pipe2");
  read_end.Reset(fds[0]);
  write_end.Reset(fds[1]);
  return absl::OkStatus();
}

std::string Plural(size_t n, std::string_view noun, std::string_view plural) {
  return fmt::format("{} {}", n, n == 1 ? noun : plural);
}

std::optional<Clock::time_point> Deadline(Clock::time_point from, absl::Duration d) {
  if (d == absl::InfiniteDuration()) return std::nullopt;
  return from + std::chrono::duration_cast<Clock::duration>(absl::ToChronoNanoseconds(d));
}

// One output pipe of a child, cut into lines that go to `sink` with the child's prefix.
struct Stream {
  Fd fd;  // the read end (non-blocking); closed at end of file
  std::string partial;
  std::ostream* sink = nullptr;
  std::string prefix;

  void Add(std::string_view data) {
    partial.append(data);
    size_t start = 0;
    for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      *sink << prefix << std::string_view(partial).substr(start, nl + 1 - start);
    }
    partial.erase(0, start);
    if (partial.size() >= kMaxLine) Finish();
  }
  // Passes on a last line without a newline.
  void Finish() {
    if (!partial.empty()) *sink << prefix << partial << '\n';
    partial.clear();
  }
  // One read; false at end of file (or a read error), when the pipe is closed.
  bool ReadOnce() {
    char buffer[65536];
    ssize_t n = read(fd.get(), buffer, sizeof(buffer));
    if (n > 0) {
      Add(std::string_view(buffer, n));
      return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    Finish();
    fd.Reset();
    return false;
  }
  // Reads what the pipe holds now, then closes it.
  void Drain() {
    while (fd.valid()) {
      char buffer[65536];
      ssize_t n = read(fd.get(), buffer, sizeof(buffer));
      if (n > 0) {
        Add(std::string_view(buffer, n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        Finish();
        fd.Reset();
      }
    }
  }
};

struct Child {
  int id = 0;
  pid_t pid = -1;
  Fd pidfd;  // readable once the child exits; invalid without pidfd support
  Stream out, err;
  bool running = false;  // started and not yet reaped
  bool cannot_run = false;
};

// SIGINT and SIGTERM written as bytes to a pipe that the poll loop reads.
volatile sig_atomic_t signal_pipe_write = -1;

void OnSignal(int sig) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(signal_pipe_write, &byte, 1);
  errno = saved;
}

constexpr int kForwarded[] = {SIGINT, SIGTERM};

// Installs the forwarding handlers; the destructor restores the previous ones.
class SignalForwarding {
 public:
  absl::Status Install() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return Errno("pipe2");
    read_end_.Reset(fds[0]);
    write_end_.Reset(fds[1]);
    signal_pipe_write = write_end_.get();
    struct sigaction action = {};
    action.sa_handler = OnSignal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < std::size(kForwarded); ++i) {
      if (sigaction(kForwarded[i], &action, &previous_[i]) != 0) return Errno("sigaction");
      installed_ = i + 1;
    }
    return absl::OkStatus();
  }
  ~SignalForwarding() {
    for (size_t i = 0; i < installed_; ++i) sigaction(kForwarded[i], &previous_[i], nullptr);
    if (write_end_.valid()) signal_pipe_write = -1;
  }
  int read_fd() const { return read_end_.get(); }

 private:
  Fd read_end_, write_end_;
  struct sigaction previous_[std::size(kForwarded)] = {};
  size_t installed_ = 0;
};

// What a child needs between fork and exec, prepared beforehand (only async-signal-safe calls
// happen in the child).
struct ChildSetup {
  pid_t parent = 0;
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1, status_fd = -1;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const sigset_t* mask = nullptr;  // the signal mask to run with
};

[[noreturn]] void RunChild(const ChildSetup& setup) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != setup.parent) _exit(kCannotRun);  // the launcher died before prctl
  // Move the descriptors above 2 first, so that none is overwritten by another's dup2.
  int in = fcntl(setup.stdin_fd, F_DUPFD_CLOEXEC, 3);
  int out = fcntl(setup.stdout_fd, F_DUPFD_CLOEXEC, 3);
  int err = fcntl(setup.stderr_fd, F_DUPFD_CLOEXEC, 3);
  if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) {
    int e = errno;
    [[maybe_unused]] ssize_t n = write(setup.status_fd, &e, sizeof(e));
    _exit(kCannotRun);
  }
  struct sigaction action = {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE}) sigaction(sig, &action, nullptr);
  sigprocmask(SIG_SETMASK, setup.mask, nullptr);
  execvpe(setup.argv[0], setup.argv, setup.envp);
  int e = errno;
  [[maybe_unused]] ssize_t n = write(setup.status_fd, &e, sizeof(e));
  _exit(kCannotRun);
}

std::vector<std::string> InheritedEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    bool ours = false;
    for (const char* name : kEnvNames) {
      ours |= entry.starts_with(name) && entry.size() > strlen(name) && entry[strlen(name)] == '=';
    }
    if (!ours) env.emplace_back(entry);
  }
  return env;
}

// The cores this process may run on, shared out among `n` children (at least one each).
int ThreadsPerChild(int n) {
  cpu_set_t set;
  int cores = 1;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = std::max(1, CPU_COUNT(&set));
  return std::max(1, cores / n);
}

bool HasVariable(const std::vector<std::string>& env, std::string_view name) {
  return std::any_of(env.begin(), env.end(), [&](const std::string& entry) {
    return entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=';
  });
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

class Launcher {
 public:
  Launcher(const LaunchOptions& options, std::ostream& out, std::ostream& err)
      : options_(options), out_(out), err_(err) {}

  absl::StatusOr<int> Run(const std::string& coordinator) {
    start_ = Clock::now();
    timeout_at_ = Deadline(start_, options_.timeout);
    SignalForwarding forwarding;
    if (options_.forward_signals) {
      RETURN_IF_ERROR(forwarding.Install());
      signal_fd_ = forwarding.read_fd();
    }
    if (absl::Status s = StartAll(coordinator); !s.ok()) {
      KillAndReapAll();
      return s;
    }
    Loop();
    return result_.value_or(0);
  }

 private:
  absl::Status StartAll(const std::string& coordinator) {
    Fd dev_null(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!dev_null.valid()) return Errno("open /dev/null");
    std::vector<std::string> argv_strings = options_.argv;
    std::vector<char*> argv = CStrings(argv_strings);
    std::vector<std::string> inherited = InheritedEnvironment();
    const int n = options_.num_processes;
    if (!HasVariable(inherited, "SHARDJIT_NUM_THREADS")) {
      inherited.push_back(fmt::format("SHARDJIT_NUM_THREADS={}", ThreadsPerChild(n)));
    }
    children_.resize(n);
    for (int i = 0; i < n && !stopping_; ++i) {
      std::vector<std::string> env_strings = inherited;
      env_strings.push_back(fmt::format("SHARDJIT_NUM_PROCESSES={}", n));
      env_strings.push_back(fmt::format("SHARDJIT_PROCESS_ID={}", i));
      env_strings.push_back(fmt::format("SHARDJIT_COORDINATOR={}", coordinator));
      std::vector<char*> envp = CStrings(env_strings);
      if (absl::Status s = Start(i, dev_null.get(), argv.data(), envp.data()); !s.ok()) {
        return absl::Status(
            s.code(), fmt::format("cannot start process {}: {}", i, std::string(s.message())));
      }
    }
    out_.flush();
    err_.flush();
    return absl::OkStatus();
  }

  // Forks child i and waits until it has exec'd (or failed to).
  absl::Status Start(int i, int stdin_fd, char* const* argv, char* const* envp) {
    Child& child = children_[i];
    child.id = i;
    Fd out_write, err_write, status_read, status_write;
    RETURN_IF_ERROR(MakePipe(child.out.fd, out_write));
    RETURN_IF_ERROR(MakePipe(child.err.fd, err_write));
    RETURN_IF_ERROR(MakePipe(status_read, status_write));
    for (Stream* stream : {&child.out, &child.err}) {
      if (fcntl(stream->fd.get(), F_SETFL, O_NONBLOCK) != 0) return Errno("fcntl");
      stream->prefix = fmt::format("[{}] ", i);
    }
    child.out.sink = &out_;
    child.err.sink = &err_;

    // Signals stay blocked from fork until the child has reset their handlers.
    sigset_t all, previous;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &previous);
    ChildSetup setup;
    setup.parent = getpid();
    setup.stdin_fd = stdin_fd;
    setup.stdout_fd = out_write.get();
    setup.stderr_fd = err_write.get();
    setup.status_fd = status_write.get();
    setup.argv = argv;
    setup.envp = envp;
    setup.mask = &previous;
    pid_t pid = fork();
    if (pid == 0) RunChild(setup);
    int fork_errno = errno;
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    if (pid < 0) return absl::ErrnoToStatus(fork_errno, "fork");
    setpgid(pid, pid);  // also done by the child; whichever comes first
    child.pid = pid;
    child.running = true;
#ifdef SYS_pidfd_open
    child.pidfd.Reset(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
#endif
    status_write.Reset();
    int child_errno = 0;
    ssize_t got;
    do {
      got = read(status_read.get(), &child_errno, sizeof(child_errno));
    } while (got < 0 && errno == EINTR);
    if (got == sizeof(child_errno)) {
      child.cannot_run = true;
      err_ << fmt::format("launch: process {}: cannot run {}: {}\n", i, options_.argv[0],
                          strerror(child_errno));
      SetResult(kCannotRun);
      Stop(Clock::now());
    }
    return absl::OkStatus();
  }

  void Loop() {
    constexpr short kEvents = POLLIN | POLLHUP | POLLERR;
    while (Running() > 0) {
      Clock::time_point now = Clock::now();
      CheckDeadlines(now);

      // Poll the pipes, the pidfds, the signal pipe and the output until the next deadline.
      std::vector<pollfd> fds;
      std::vector<Stream*> streams;
      bool tick = false;
      for (Child& child : children_) {
        for (Stream* stream : {&child.out, &child.err}) {
          if (!stream->fd.valid()) continue;
          fds.push_back({stream->fd.get(), kEvents, 0});
          streams.push_back(stream);
        }
        if (child.pidfd.valid()) {
          fds.push_back({child.pidfd.get(), POLLIN, 0});
        } else if (child.running) {
          tick = true;
        }
      }
      if (signal_fd_ >= 0) fds.push_back({signal_fd_, POLLIN, 0});
      const size_t output_index = fds.size();
      if (options_.output_fd >= 0 && !output_closed_) fds.push_back({options_.output_fd, 0, 0});
      if (poll(fds.data(), fds.size(), PollTimeoutMs(now, tick)) < 0 && errno != EINTR) {
        err_ << fmt::format("launch: poll: {}\n", strerror(errno));
        Stop(now);
      }

      for (size_t k = 0; k < streams.size(); ++k) {
        if (fds[k].revents != 0) streams[k]->ReadOnce();
      }
      if (signal_fd_ >= 0) ReadSignals();
      if (output_index < fds.size() && (fds[output_index].revents & (POLLERR | POLLHUP))) {
        OutputClosed();
      }
      for (Child& child : children_) {
        int status;
        if (child.running && waitpid(child.pid, &status, WNOHANG) == child.pid) {
          Exited(child, status);
        }
      }
      out_.flush();
      err_.flush();
      if (!out_ && !output_closed_) OutputClosed();
    }
  }

  size_t Running() const {
    return std::count_if(children_.begin(), children_.end(),
                         [](const Child& c) { return c.running; });
  }

  int PollTimeoutMs(Clock::time_point now, bool tick) const {
    std::optional<Clock::time_point> next;
    auto consider = [&](std::optional<Clock::time_point> t) {
      if (t && (!next || *t < *next)) next = t;
    };
    if (!stopping_) {
      consider(timeout_at_);
      consider(grace_end_);
    } else if (!killed_) {
      consider(kill_at_);
    }
    if (tick) consider(now + kTick);
    if (!next) return -1;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
    return static_cast<int>(std::clamp<decltype(ms)>(ms, 0, 3600 * 1000));
  }

  void CheckDeadlines(Clock::time_point now) {
    if (!stopping_ && timeout_at_ && now >= *timeout_at_) {
      err_ << fmt::format("launch: timed out after {}; stopping {}\n",
                          absl::FormatDuration(options_.timeout),
                          Plural(Running(), "process", "processes"));
      SetResult(kTimedOut);
      Stop(now);
    }
    if (!stopping_ && grace_end_ && now >= *grace_end_) {
      err_ << fmt::format("launch: {} still running {} after the first failure; stopping them\n",
                          Plural(Running(), "process", "processes"),
                          absl::FormatDuration(options_.grace));
      Stop(now);
    }
    if (stopping_ && !killed_ && kill_at_ && now >= *kill_at_) {
      err_ << fmt::format("launch: {} still running {} after {}; sending SIGKILL\n",
                          Plural(Running(), "process", "processes"),
                          absl::FormatDuration(options_.kill_delay), SignalName(stop_signal_));
      SignalAll(SIGKILL);
      killed_ = true;
    }
    err_.flush();
  }

  void ReadSignals() {
    unsigned char sigs[64];
    ssize_t n = read(signal_fd_, sigs, sizeof(sigs));
    for (ssize_t k = 0; k < n; ++k) {
      int sig = sigs[k];
      if (++signals_seen_ == 1) {
        err_ << fmt::format("launch: got {}; passing it on to the processes\n", SignalName(sig));
        SetResult(128 + sig);
        SignalAll(sig);
        if (!stopping_) {
          stopping_ = true;
          stop_signal_ = sig;
          kill_at_ = *Deadline(Clock::now(), options_.kill_delay);
        }
      } else if (!killed_) {
        err_ << fmt::format("launch: got {} again; killing the processes\n", SignalName(sig));
        SignalAll(SIGKILL);
        killed_ = true;
      }
    }
  }

  void OutputClosed() {
    output_closed_ = true;
    err_ << "launch: the output was closed; stopping the processes\n";
    SetResult(kOutputClosed);
    Stop(Clock::now());
  }

  void Exited(Child& child, int status) {
    child.running = false;
    kill(-child.pid, SIGKILL);  // whatever the child left behind in its process group
    child.pidfd.Reset();
    child.out.Drain();
    child.err.Drain();
    if (child.cannot_run) return;  // reported when it failed to exec
    int code = 0;
    if (WIFEXITED(status)) {
      code = WEXITSTATUS(status);
      if (code != 0) {
        err_ << fmt::format("launch: process {} exited with status {}\n", child.id, code);
      }
    } else if (WIFSIGNALED(status)) {
      code = 128 + WTERMSIG(status);
      err_ << fmt::format("launch: process {} killed by signal {}\n", child.id,
                          SignalName(WTERMSIG(status)));
    }
    if (code == 0) return;
    SetResult(code);
    if (!grace_end_) grace_end_ = Deadline(Clock::now(), options_.grace);
  }

  // SIGTERM to every running child now, SIGKILL after kill_delay.
  void Stop(Clock::time_point now) {
    if (stopping_) return;
    stopping_ = true;
    SignalAll(SIGTERM);
    kill_at_ = *Deadline(now, options_.kill_delay);
  }

  // Signals the process groups of the running children (but not one that failed to exec: it
  // is exiting with status 127 by itself).
  void SignalAll(int sig) {
    for (const Child& child : children_) {
      if (child.running && !child.cannot_run && kill(-child.pid, sig) != 0) kill(child.pid, sig);
    }
  }

  void KillAndReapAll() {
    SignalAll(SIGKILL);
    for (Child& child : children_) {
      if (!child.running) continue;
      int status;
      while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
      }
      child.running = false;
    }
  }

  void SetResult(int status) {
    if (!result_) result_ = status;
  }

  const LaunchOptions& options_;
  std::ostream& out_;
  std::ostream& err_;
  std::vector<Child> children_;
  int signal_fd_ = -1;
  Clock::time_point start_;
  std::optional<Clock::time_point> timeout_at_, grace_end_, kill_at_;
  std::optional<int> result_;
  bool stopping_ = false;  // SIGTERM (or a forwarded signal) went out
  int stop_signal_ = SIGTERM;
  bool killed_ = false;  // SIGKILL went out
  bool output_closed_ = false;
  int signals_seen_ = 0;
};

}  // namespace

std::string SignalName(int sig) {
  if (const char* abbrev = sigabbrev_np(sig); abbrev != nullptr) {
    return fmt::format("SIG{}", abbrev);
  }
  return fmt::format("signal {}", sig);
}

absl::StatusOr<int> PickFreePort() {
  Fd sock(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return Errno("socket");
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  if (bind(sock.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    return Errno("bind 127.0.0.1:0");
  }
  socklen_t length = sizeof(address);
  if (getsockname(sock.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return Errno("getsockname");
  }
  return static_cast<int>(ntohs(address.sin_port));
}

absl::StatusOr<int> Launch(const LaunchOptions& options, std::ostream& out, std::ostream& err) {
  if (options.num_processes < 1) {
    return absl::InvalidArgumentError(
        fmt::format("the number of processes must be at least 1, got {}", options.num_processes));
  }
  if (options.argv.empty() || options.argv[0].empty()) {
    return absl::InvalidArgumentError("no program to run");
  }
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        fmt::format("the port must be in 0..65535, got {}", options.port));
  }
  const std::pair<const char*, absl::Duration> durations[] = {
      {"timeout", options.timeout}, {"grace", options.grace}, {"kill_delay", options.kill_delay}};
  for (const auto& [name, d] : durations) {
    if (d < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          fmt::format("the {} must not be negative, got {}", name, absl::FormatDuration(d)));
    }
  }
  if (options.kill_delay == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("the kill_delay must be finite");
  }
  int port = options.port;
  if (port == 0) {
    ASSIGN_OR_RETURN(port, PickFreePort());
  }
  return Launcher(options, out, err).Run(fmt::format("127.0.0.1:{}", port));
}

absl::StatusOr<int> LaunchSelf(int num_processes, const std::vector<std::string>& args) {
  char self[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0) return Errno("readlink /proc/self/exe");
  LaunchOptions options{.num_processes = num_processes,
                        .forward_signals = true,
                        .output_fd = STDOUT_FILENO,
                        .argv = {std::string(self, length)}};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  std::fflush(stdout);  // what this process printed comes before the children's lines
  return Launch(options, std::cout, std::cerr);
}

}  // namespace shardjit::runtime
