#include "runtime/distributed/distributed.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "gloo/rendezvous/file_store.h"
#include "runtime/distributed/gloo_process_group.h"
#include "runtime/distributed/tcp_store.h"

namespace shardjit::runtime {
namespace {

// The group of a job of one process: nothing to connect.
class SingleProcessGroup final : public ProcessGroup {
 public:
  int process_id() const override { return 0; }
  int num_processes() const override { return 1; }
  std::unique_ptr<RemotePeers> BeginRun(const ir::Mesh&, const std::vector<int>&,
                                        RunState&) override {
    return nullptr;  // every position of every run is here
  }
  absl::Status Flush() override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<Block>> ExchangeBlocks(const std::vector<Block>&) override {
    return std::vector<Block>{};
  }
  absl::StatusOr<std::string> AgreeOn(const std::string&, const std::string& value) override {
    return value;
  }
};

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        fmt::format("coordinator \"{}\" is not HOST:PORT with a port in 1..65535", address));
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host, port);
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string ThisHost() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "127.0.0.1";
  return name;
}

// Every process says it is here, then waits for all the others: a process that never starts is
// named, instead of surfacing as a Gloo connection timeout.
absl::Status Join(gloo::rendezvous::Store& store, const DistributedOptions& o) {
  auto key = [](int p) { return fmt::format("shardjit/joined/{}", p); };
  try {
    store.set(key(o.process_id), {'1'});
  } catch (const std::exception& e) {
    return absl::UnavailableError(fmt::format("process {}: joining failed: {}", o.process_id,
                                              e.what()));
  }
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(o.timeout);
  std::vector<int> missing;
  for (int p = 0; p < o.num_processes; ++p) {
    const auto left = std::max(std::chrono::milliseconds(1),
                               std::chrono::duration_cast<std::chrono::milliseconds>(
                                   deadline - std::chrono::steady_clock::now()));
    try {
      store.wait({key(p)}, left);
    } catch (const std::exception&) {
      missing.push_back(p);
    }
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::DeadlineExceededError(fmt::format(
      "process {} of {}: processes [{}] did not join within {} (meeting at {})", o.process_id,
      o.num_processes, absl::StrJoin(missing, ","), absl::FormatDuration(o.timeout),
      o.coordinator.empty() ? "store directory " + o.store_dir : "coordinator " + o.coordinator));
}

absl::StatusOr<int> IntFromEnv(const char* name, bool* present) {
  const char* v = std::getenv(name);
  *present = v != nullptr && *v != '\0';
  int out = 0;
  if (*present && !absl::SimpleAtoi(v, &out)) {
    return absl::InvalidArgumentError(fmt::format("{}=\"{}\" is not an integer", name, v));
  }
  return out;
}

std::string StringFromEnv(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

absl::StatusOr<std::optional<DistributedOptions>> DistributedOptions::FromEnv() {
  bool has_n = false, has_id = false, has_timeout = false;
  ASSIGN_OR_RETURN(int n, IntFromEnv("SHARDJIT_NUM_PROCESSES", &has_n));
  if (!has_n) return std::optional<DistributedOptions>();
  DistributedOptions o;
  o.num_processes = n;
  ASSIGN_OR_RETURN(int id, IntFromEnv("SHARDJIT_PROCESS_ID", &has_id));
  if (!has_id && o.num_processes > 1) {
    return absl::InvalidArgumentError(
        "SHARDJIT_NUM_PROCESSES is set but SHARDJIT_PROCESS_ID is not");
  }
  o.process_id = id;
  o.coordinator = StringFromEnv("SHARDJIT_COORDINATOR");
  o.store_dir = StringFromEnv("SHARDJIT_STORE_DIR");
  o.hostname = StringFromEnv("SHARDJIT_HOSTNAME");
  ASSIGN_OR_RETURN(int seconds, IntFromEnv("SHARDJIT_DISTRIBUTED_TIMEOUT", &has_timeout));
  if (has_timeout) {
    if (seconds <= 0) {
      return absl::InvalidArgumentError("SHARDJIT_DISTRIBUTED_TIMEOUT must be positive");
    }
    o.timeout = absl::Seconds(seconds);
  }
  return std::optional<DistributedOptions>(o);
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> InitializeDistributed(
    const DistributedOptions& o) {
  if (o.num_processes < 1 || o.num_processes > 4096) {
    return absl::InvalidArgumentError(
        fmt::format("distributed: {} processes (1 to 4096)", o.num_processes));
  }
  if (o.process_id < 0 || o.process_id >= o.num_processes) {
    return absl::InvalidArgumentError(fmt::format(
        "distributed: process id {} is not in [0, {})", o.process_id, o.num_processes));
  }
  if (o.num_processes == 1) return std::make_shared<SingleProcessGroup>();
  // Gloo writes to its sockets without MSG_NOSIGNAL: a peer that dies must fail a run, not raise
  // SIGPIPE here. A handler the program installed is kept.
  struct sigaction old_action = {};
  if (sigaction(SIGPIPE, nullptr, &old_action) == 0 && old_action.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
  if (o.coordinator.empty() == o.store_dir.empty()) {
    return absl::InvalidArgumentError(
        "distributed: give either a coordinator (HOST:PORT, SHARDJIT_COORDINATOR) or a store "
        "directory (SHARDJIT_STORE_DIR)");
  }
  std::shared_ptr<gloo::rendezvous::Store> store;
  std::shared_ptr<void> server;
  std::string hostname = o.hostname;
  if (!o.coordinator.empty()) {
    ASSIGN_OR_RETURN(auto address, SplitHostPort(o.coordinator));  // std::pair<std::string, int>
    const auto& [host, port] = address;
    if (hostname.empty()) hostname = IsLoopback(host) ? "127.0.0.1" : ThisHost();
    if (o.process_id == 0) {
      absl::StatusOr<std::unique_ptr<TcpStoreServer>> started = TcpStoreServer::Start(host, port);
      if (!started.ok()) {
        return absl::Status(started.status().code(),
                            fmt::format("process 0 serving the coordinator: {}",
                                        started.status().message()));
      }
      server = std::shared_ptr<TcpStoreServer>(std::move(*started));
    }
    absl::StatusOr<std::unique_ptr<TcpStore>> client =
        TcpStore::Connect(host, port, absl::ToChronoMilliseconds(o.timeout));
    if (!client.ok()) {
      return absl::Status(client.status().code(),
                          fmt::format("process {}: {}", o.process_id, client.status().message()));
    }
    store = std::shared_ptr<TcpStore>(std::move(*client));
  } else {
    if (hostname.empty()) hostname = ThisHost();
    ::mkdir(o.store_dir.c_str(), 0755);
    struct stat st;
    if (::stat(o.store_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          fmt::format("distributed: store directory \"{}\" is not a directory", o.store_dir));
    }
    try {
      store = std::make_shared<gloo::rendezvous::FileStore>(o.store_dir);
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          fmt::format("distributed: file store in \"{}\": {}", o.store_dir, e.what()));
    }
  }
  RETURN_IF_ERROR(Join(*store, o));
  distributed::GlooOptions gloo;
  gloo.rank = o.process_id;
  gloo.size = o.num_processes;
  gloo.hostname = hostname;
  gloo.timeout = o.timeout;
  return distributed::ConnectGloo(gloo, std::move(store), std::move(server));
}

}  // namespace shardjit::runtime
