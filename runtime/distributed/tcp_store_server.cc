// The TCP store's server: one thread multiplexing every connection with poll(2).
#include "runtime/distributed/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "fmt/format.h"
#include "runtime/distributed/tcp_store_wire.h"

namespace shardjit::runtime {

using namespace tcp_store_wire;  // NOLINT: the store's wire format, shared with the client

class TcpStoreServer::Loop {
 public:
  Loop(int listen_fd, int wake_fd, const std::atomic<bool>* stopping)
      : listen_fd_(listen_fd), wake_fd_(wake_fd), stopping_(stopping), buffer_(kChunkBytes) {}
  ~Loop() {
    for (auto& [id, conn] : conns_) close(conn->fd);
  }

  // Serves until `stopping` is set and the wake fd written.
  void Run();
  // Connections with a held request (TcpStoreServer::held_requests); read from any thread.
  int held() const { return held_.load(std::memory_order_acquire); }

 private:
  // A GET or WAIT waiting for keys.
  struct Held {
    Message request;
    std::vector<std::string> missing;  // distinct keys not set when it was held
    size_t missing_left = 0;           // of those, the ones still not set
    Deadline deadline = kNever;
  };
  struct Conn {
    uint64_t id = 0;
    int fd = -1;
    MessageReader reader{kSet, kAdd};
    std::deque<Message> requests;  // read, not yet served: they wait behind a held one
    std::optional<Held> held;
    std::string out;  // replies not yet sent, from out_pos
    size_t out_pos = 0;
    bool dead = false;
  };

  Conn* Find(uint64_t id) {
    auto it = conns_.find(id);
    return it == conns_.end() || it->second->dead ? nullptr : it->second.get();
  }
  void Accept();
  void Read(Conn& conn);
  // Serves the connection's requests in order until one has to wait.
  void Serve(Conn& conn);
  void Hold(Conn& conn, Message request, std::vector<std::string> missing);
  // Answers a held request whose keys are all set.
  void Release(Conn& conn);
  // Answers the held requests whose deadline passed.
  void Expire(Clock::time_point now);
  // Called when `key` is set for the first time: counts it off the requests waiting for it.
  void KeyAdded(const std::string& key);
  // Stops counting the held request's keys that are still missing.
  void Unregister(Conn& conn);
  void Reply(Conn& conn, uint32_t status, int64_t arg, const std::vector<absl::string_view>& items);
  void ReplyError(Conn& conn, absl::string_view message) { Reply(conn, kError, 0, {message}); }
  // Sends as much pending output as the socket takes.
  void Flush(Conn& conn);
  // Forgets the connection; it is closed at the end of the loop's turn.
  void Drop(Conn& conn);
  void ServeRunnable();

  const int listen_fd_;
  const int wake_fd_;
  const std::atomic<bool>* const stopping_;
  std::vector<char> buffer_;
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t next_id_ = 0;
  absl::flat_hash_map<std::string, std::string> data_;
  absl::flat_hash_map<std::string, std::vector<uint64_t>> waiters_;  // key -> held connections
  std::vector<uint64_t> runnable_;  // connections whose held request was answered
  Clock::time_point accept_resume_{};
  std::atomic<int> held_{0};  // connections whose `held` is set
};

void TcpStoreServer::Loop::Run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (!stopping_->load(std::memory_order_acquire)) {
    fds.clear();
    ids.clear();
    const Clock::time_point now = Clock::now();
    const bool accepting = now >= accept_resume_;
    Deadline next = accepting ? kNever : accept_resume_;
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    for (const auto& [id, conn] : conns_) {
      short events = POLLRDHUP;
      if (!conn->held && conn->out.size() - conn->out_pos < kMaxPendingOutput) events |= POLLIN;
      if (conn->out_pos < conn->out.size()) events |= POLLOUT;
      fds.push_back({conn->fd, events, 0});
      ids.push_back(id);
      if (conn->held) next = std::min(next, conn->held->deadline);
    }
    int timeout_ms = -1;
    if (next != kNever) {
      timeout_ms = static_cast<int>(std::clamp<int64_t>(
          std::chrono::ceil<std::chrono::milliseconds>(next - now).count(), 0, INT_MAX));
    }
    const int n = poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0) {
      if (errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // ENOMEM
      continue;
    }
    if (fds[0].revents != 0) {
      uint64_t count;
      while (read(wake_fd_, &count, sizeof(count)) > 0) {
      }
    }
    if (fds[1].revents != 0) Accept();
    for (size_t i = 0; i < ids.size(); ++i) {
      const short revents = fds[i + 2].revents;
      Conn* conn = Find(ids[i]);
      if (revents == 0 || conn == nullptr) continue;
      if (revents & POLLOUT) Flush(*conn);
      if (conn->dead) continue;
      if (fds[i + 2].events & POLLIN) {
        if (revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) Read(*conn);
      } else if (revents & (POLLRDHUP | POLLHUP | POLLERR)) {
        Drop(*conn);  // gone while we were not reading from it
      }
    }
    ServeRunnable();
    Expire(Clock::now());
    ServeRunnable();
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (it->second->dead) {
        close(it->second->fd);
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void TcpStoreServer::Loop::Accept() {
  while (true) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        accept_resume_ = Clock::now() + kAcceptPause;
      }
      return;  // EAGAIN: accepted every pending connection
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto conn = std::make_unique<Conn>();
    conn->id = next_id_++;
    conn->fd = fd;
    conns_.emplace(conn->id, std::move(conn));
  }
}

void TcpStoreServer::Loop::Read(Conn& conn) {
  const ssize_t n = recv(conn.fd, buffer_.data(), buffer_.size(), 0);
  if (n < 0) {
    if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) Drop(conn);
    return;
  }
  if (n == 0) {  // the client hung up, maybe in the middle of a message
    Drop(conn);
    return;
  }
  if (!conn.reader.Feed(buffer_.data(), n, conn.requests).ok()) {
    Drop(conn);  // malformed: there is no telling where its next message starts
    return;
  }
  Serve(conn);
}

void TcpStoreServer::Loop::Serve(Conn& conn) {
  while (!conn.dead && !conn.held && !conn.requests.empty()) {
    Message request = std::move(conn.requests.front());
    conn.requests.pop_front();
    std::vector<std::string>& items = request.items;
    switch (request.code) {
      case kSet: {
        if (items.size() != 2) {
          ReplyError(conn, fmt::format("SET takes a key and a value, got {} items", items.size()));
          break;
        }
        const bool added = data_.insert_or_assign(items[0], std::move(items[1])).second;
        Reply(conn, kOk, 0, {});
        if (added) KeyAdded(items[0]);
        break;
      }
      case kAdd: {
        if (items.size() != 1) {
          ReplyError(conn, fmt::format("ADD takes a key, got {} items", items.size()));
          break;
        }
        int64_t value = 0;
        auto it = data_.find(items[0]);
        if (it != data_.end() && !absl::SimpleAtoi(it->second, &value)) {
          ReplyError(conn, absl::StrCat("ADD: the value of key ", absl::CHexEscape(items[0]),
                                        " is not an integer"));
          break;
        }
        if (__builtin_add_overflow(value, request.arg, &value)) {
          ReplyError(conn, absl::StrCat("ADD: adding ", request.arg, " to key ",
                                        absl::CHexEscape(items[0]), " overflows"));
          break;
        }
        const bool added = it == data_.end();
        data_.insert_or_assign(items[0], absl::StrCat(value));
        Reply(conn, kOk, value, {});
        if (added) KeyAdded(items[0]);
        break;
      }
      case kGet:
      case kWait: {
        if (request.arg < 0) {
          ReplyError(conn, fmt::format("negative timeout {} ms", request.arg));
          break;
        }
        if (request.code == kGet && items.size() != 1) {
          ReplyError(conn, fmt::format("GET takes a key, got {} items", items.size()));
          break;
        }
        std::vector<std::string> missing;
        absl::flat_hash_set<absl::string_view> seen;
        for (const std::string& key : items) {
          if (!data_.contains(key) && seen.insert(key).second) missing.push_back(key);
        }
        if (missing.empty()) {
          if (request.code == kGet) {
            Reply(conn, kOk, 0, {data_.find(items[0])->second});
          } else {
            Reply(conn, kOk, 0, {});
          }
        } else {
          Hold(conn, std::move(request), std::move(missing));
        }
        break;
      }
      default:  // the reader passes no other command
        Drop(conn);
    }
  }
}

void TcpStoreServer::Loop::Hold(Conn& conn, Message request, std::vector<std::string> missing) {
  Held& held = conn.held.emplace();
  held_.fetch_add(1, std::memory_order_release);
  if (request.arg > 0 && request.arg < kMaxTimeoutMs) {
    held.deadline = Clock::now() + std::chrono::milliseconds(request.arg);
  }
  held.request = std::move(request);
  held.missing = std::move(missing);
  held.missing_left = held.missing.size();
  for (const std::string& key : held.missing) waiters_[key].push_back(conn.id);
}

void TcpStoreServer::Loop::Release(Conn& conn) {
  Held held = std::move(*conn.held);
  conn.held.reset();
  held_.fetch_sub(1, std::memory_order_release);
  if (held.request.code == kGet) {
    Reply(conn, kOk, 0, {data_.find(held.request.items[0])->second});
  } else {
    Reply(conn, kOk, 0, {});
  }
  runnable_.push_back(conn.id);
}

void TcpStoreServer::Loop::KeyAdded(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  const std::vector<uint64_t> ids = std::move(it->second);
  waiters_.erase(it);
  for (uint64_t id : ids) {
    Conn* conn = Find(id);
    if (conn != nullptr && conn->held && --conn->held->missing_left == 0) Release(*conn);
  }
}

void TcpStoreServer::Loop::Expire(Clock::time_point now) {
  for (auto& [id, conn] : conns_) {
    if (conn->dead || !conn->held || conn->held->deadline > now) {
      continue;
    }
    std::vector<absl::string_view> missing;
    for (const std::string& key : conn->held->missing) {
      if (!data_.contains(key)) missing.push_back(key);
    }
    Unregister(*conn);
    Reply(*conn, kTimeout, 0, missing);  // `missing` points into the held request: reply first
    conn->held.reset();
    held_.fetch_sub(1, std::memory_order_release);
    runnable_.push_back(id);
  }
}

void TcpStoreServer::Loop::Unregister(Conn& conn) {
  for (const std::string& key : conn.held->missing) {
    auto it = waiters_.find(key);
    if (it == waiters_.end()) continue;  // set since
    std::vector<uint64_t>& ids = it->second;
    ids.erase(std::remove(ids.begin(), ids.end(), conn.id), ids.end());
    if (ids.empty()) waiters_.erase(it);
  }
}

void TcpStoreServer::Loop::ServeRunnable() {
  while (!runnable_.empty()) {
    const uint64_t id = runnable_.back();
    runnable_.pop_back();
    if (Conn* conn = Find(id)) Serve(*conn);
  }
}

void TcpStoreServer::Loop::Reply(Conn& conn, uint32_t status, int64_t arg,
                                 const std::vector<absl::string_view>& items) {
  if (conn.dead) return;
  Encode(status, arg, items, conn.out);
  Flush(conn);
}

void TcpStoreServer::Loop::Flush(Conn& conn) {
  while (conn.out_pos < conn.out.size()) {
    const ssize_t n = send(conn.fd, conn.out.data() + conn.out_pos, conn.out.size() - conn.out_pos,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) Drop(conn);
      break;
    }
    conn.out_pos += n;
  }
  if (conn.out_pos == conn.out.size()) {
    conn.out.clear();
    conn.out_pos = 0;
  } else if (conn.out_pos >= (1 << 20)) {
    conn.out.erase(0, conn.out_pos);
    conn.out_pos = 0;
  }
}

void TcpStoreServer::Loop::Drop(Conn& conn) {
  if (conn.dead) return;
  if (conn.held) {
    Unregister(conn);
    conn.held.reset();
    held_.fetch_sub(1, std::memory_order_release);
  }
  conn.requests.clear();
  conn.out.clear();
  conn.out_pos = 0;
  conn.dead = true;
}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host,
                                                                      int port) {
  const std::string where = absl::StrCat("TCP store server at ", HostPort(host, port));
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": port out of range"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addrs = nullptr;
  const std::string service = absl::StrCat(port);
  const int gai =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &addrs);
  if (gai != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": cannot resolve host '", host, "' (",
                     gai == EAI_SYSTEM ? ErrnoText(errno) : std::string(gai_strerror(gai)), ")"));
  }
  UniqueFd listen_fd;
  std::string failure = "no address to bind";
  for (addrinfo* a = addrs; a != nullptr && listen_fd.get() < 0; a = a->ai_next) {
    UniqueFd fd(
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (fd.get() < 0) {
      failure = "socket: " + ErrnoText(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      failure = "cannot bind (" + ErrnoText(errno) + ")";
      continue;
    }
    if (listen(fd.get(), 1024) != 0) {
      failure = "cannot listen (" + ErrnoText(errno) + ")";
      continue;
    }
    listen_fd.reset(fd.release());
  }
  freeaddrinfo(addrs);
  if (listen_fd.get() < 0) return absl::UnavailableError(absl::StrCat(where, ": ", failure));

  sockaddr_storage bound{};
  socklen_t bound_size = sizeof(bound);
  if (getsockname(listen_fd.get(), reinterpret_cast<sockaddr*>(&bound), &bound_size) != 0) {
    return absl::InternalError(absl::StrCat(where, ": getsockname: ", ErrnoText(errno)));
  }
  const int bound_port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  UniqueFd wake_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (wake_fd.get() < 0) {
    return absl::InternalError(absl::StrCat(where, ": eventfd: ", ErrnoText(errno)));
  }
  auto server = std::unique_ptr<TcpStoreServer>(
      new TcpStoreServer(host, bound_port, listen_fd.release(), wake_fd.release()));
  server->thread_ = std::thread([loop = server->loop_.get()] { loop->Run(); });
  return server;
}

TcpStoreServer::TcpStoreServer(std::string host, int port, int listen_fd, int wake_fd)
    : host_(std::move(host)),
      port_(port),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      loop_(std::make_unique<Loop>(listen_fd, wake_fd, &stopping_)) {}

int TcpStoreServer::held_requests() const { return loop_->held(); }

TcpStoreServer::~TcpStoreServer() {
  stopping_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  while (write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
  if (thread_.joinable()) thread_.join();
  loop_.reset();  // closes the connections
  close(listen_fd_);
  close(wake_fd_);
}

}  // namespace shardjit::runtime
