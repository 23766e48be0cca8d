#include "runtime/distributed/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "gloo/common/error.h"
#include "runtime/distributed/tcp_store_wire.h"

namespace shardjit::runtime {

using namespace tcp_store_wire;  // NOLINT: the store's wire format, shared with the server

struct TcpStore::Reply {
  uint32_t status = kOk;
  int64_t arg = 0;
  std::vector<std::string> items;
};

namespace {

std::atomic<int64_t> failed_connect_attempts{0};  // TcpStore::failed_attempts()

// Connects a non-blocking socket to `addr` within `deadline` (at least a short while): the fd,
// or -1 with `err` set.
int ConnectOnce(const addrinfo& addr, Clock::time_point deadline, int& err) {
  UniqueFd fd(
      socket(addr.ai_family, addr.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, addr.ai_protocol));
  if (fd.get() < 0) {
    err = errno;
    return -1;
  }
  if (connect(fd.get(), addr.ai_addr, addr.ai_addrlen) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) {
      err = errno;
      return -1;
    }
    // An attempt under way gets a moment even when the deadline is (nearly) there.
    const auto grace = Clock::now() + std::chrono::milliseconds(50);
    const absl::StatusOr<bool> ready = WaitReady(fd.get(), POLLOUT, std::max(deadline, grace));
    if (!ready.ok() || !*ready) {
      err = ETIMEDOUT;
      return -1;
    }
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
    if (so_error != 0) {
      err = so_error;
      return -1;
    }
  }
  // Retrying a local port nobody listens on can connect the socket to itself (TCP simultaneous
  // open, when the kernel picks that very port as the local one): that is no server.
  sockaddr_storage local{}, peer{};
  socklen_t local_size = sizeof(local), peer_size = sizeof(peer);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &local_size) == 0 &&
      getpeername(fd.get(), reinterpret_cast<sockaddr*>(&peer), &peer_size) == 0 &&
      local_size == peer_size && std::memcmp(&local, &peer, local_size) == 0) {
    err = ECONNREFUSED;
    return -1;
  }
  const int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd.release();
}

[[noreturn]] void Throw(const absl::Status& status) {
  throw gloo::IoException(std::string(status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStore>> TcpStore::Connect(const std::string& host, int port,
                                                            std::chrono::milliseconds timeout) {
  const std::string address = HostPort(host, port);
  const std::string where = absl::StrCat("TCP store at ", address);
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": port out of range"));
  }
  if (timeout.count() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": negative timeout ", FormatTimeout(timeout)));
  }
  const Clock::time_point deadline =
      Clock::now() + std::min(timeout, std::chrono::milliseconds(kMaxTimeoutMs));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* addrs = nullptr;
  const std::string service = absl::StrCat(port);
  const int gai = getaddrinfo(host.c_str(), service.c_str(), &hints, &addrs);
  if (gai != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": cannot resolve host '", host, "' (",
                     gai == EAI_SYSTEM ? ErrnoText(errno) : std::string(gai_strerror(gai)), ")"));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owned(addrs, freeaddrinfo);
  int err = ECONNREFUSED;
  auto backoff = std::chrono::milliseconds(5);
  while (true) {
    for (const addrinfo* a = addrs; a != nullptr; a = a->ai_next) {
      const int fd = ConnectOnce(*a, deadline, err);
      if (fd >= 0) return std::unique_ptr<TcpStore>(new TcpStore(address, fd, timeout));
      failed_connect_attempts.fetch_add(1, std::memory_order_relaxed);
    }
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, left));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      where, ": no answer within ", FormatTimeout(timeout), " (", ErrnoText(err), ")"));
}

int64_t TcpStore::failed_attempts() {
  return failed_connect_attempts.load(std::memory_order_relaxed);
}

TcpStore::TcpStore(std::string address, int fd, std::chrono::milliseconds timeout)
    : address_(std::move(address)), timeout_(timeout), fd_(fd) {}

TcpStore::~TcpStore() {
  if (fd_ >= 0) close(fd_);
}

absl::Status TcpStore::Break(absl::Status status) {
  close(fd_);
  fd_ = -1;
  broken_ = status;
  return status;
}

absl::StatusOr<TcpStore::Reply> TcpStore::Call(uint32_t command, int64_t arg,
                                               const std::vector<absl::string_view>& items,
                                               std::chrono::milliseconds io_limit) {
  if (items.size() > kMaxItems || EncodedSize(items) > kMaxMessageBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TCP store at ", address_, ": request of ", items.size(), " items and ", EncodedSize(items),
        " bytes is over the limit (", kMaxItems, " items, ", kMaxMessageBytes, " bytes)"));
  }
  std::string request;
  Encode(command, arg, items, request);
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return broken_;
  const Deadline deadline = io_limit.count() > 0 ? Clock::now() + io_limit : kNever;
  const std::string where = absl::StrCat("TCP store at ", address_, ": ");
  auto no_reply = [&] {
    return Break(absl::DeadlineExceededError(
        absl::StrCat(where, "no reply within ", FormatTimeout(io_limit), "; connection closed")));
  };
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += n;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      absl::StatusOr<bool> ready = WaitReady(fd_, POLLOUT, deadline);
      if (!ready.ok()) return Break(ready.status());
      if (!*ready) return no_reply();
    } else if (errno != EINTR) {
      return Break(absl::UnavailableError(
          absl::StrCat(where, "connection lost sending a request (", ErrnoText(errno), ")")));
    }
  }
  MessageReader reader(kOk, kError);
  std::deque<Message> replies;
  std::vector<char> buffer(kChunkBytes);
  while (replies.empty()) {
    const ssize_t n = recv(fd_, buffer.data(), buffer.size(), 0);
    if (n > 0) {
      if (absl::Status status = reader.Feed(buffer.data(), n, replies); !status.ok()) {
        return Break(
            absl::InternalError(absl::StrCat(where, "malformed reply: ", status.message())));
      }
    } else if (n == 0) {
      return Break(absl::UnavailableError(absl::StrCat(where, "connection closed by the server")));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      absl::StatusOr<bool> ready = WaitReady(fd_, POLLIN, deadline);
      if (!ready.ok()) return Break(ready.status());
      if (!*ready) return no_reply();
    } else if (errno != EINTR) {
      return Break(absl::UnavailableError(
          absl::StrCat(where, "connection lost awaiting a reply (", ErrnoText(errno), ")")));
    }
  }
  if (replies.size() > 1 || !reader.idle()) {
    return Break(absl::InternalError(absl::StrCat(where, "unexpected data after a reply")));
  }
  Message& message = replies.front();
  if (message.code == kError) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, message.items.empty() ? "error" : message.items[0]));
  }
  return Reply{message.code, message.arg, std::move(message.items)};
}

namespace {

// How long a client waits for the reply to a request the server holds up to `timeout`.
std::chrono::milliseconds IoLimit(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0 || timeout.count() >= kMaxTimeoutMs) {
    return std::chrono::milliseconds::zero();
  }
  return timeout + kReplySlack;
}

}  // namespace

absl::Status TcpStore::Set(const std::string& key, const std::vector<char>& value) {
  absl::StatusOr<Reply> reply =
      Call(kSet, 0, {key, absl::string_view(value.data(), value.size())}, IoLimit(timeout_));
  return reply.status();
}

absl::StatusOr<std::vector<char>> TcpStore::Get(const std::string& key,
                                                std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TCP store at ", address_, ": negative timeout for key ", absl::CHexEscape(key)));
  }
  ASSIGN_OR_RETURN(Reply reply, Call(kGet, timeout.count(), {key}, IoLimit(timeout)));
  if (reply.status == kTimeout) {
    return absl::DeadlineExceededError(absl::StrCat("TCP store at ", address_, ": ",
                                                    DescribeKeys({key}), " not set within ",
                                                    FormatTimeout(timeout)));
  }
  if (reply.items.size() != 1) {
    return absl::InternalError(absl::StrCat("TCP store at ", address_, ": reply to GET of key ",
                                            absl::CHexEscape(key), " has ", reply.items.size(),
                                            " items"));
  }
  const std::string& value = reply.items[0];
  return std::vector<char>(value.begin(), value.end());
}

absl::Status TcpStore::Wait(const std::vector<std::string>& keys,
                            std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TCP store at ", address_, ": negative timeout waiting for ", DescribeKeys(keys)));
  }
  if (keys.empty()) return absl::OkStatus();
  std::vector<absl::string_view> items(keys.begin(), keys.end());
  ASSIGN_OR_RETURN(Reply reply, Call(kWait, timeout.count(), items, IoLimit(timeout)));
  if (reply.status == kTimeout) {
    return absl::DeadlineExceededError(absl::StrCat("TCP store at ", address_, ": ",
                                                    DescribeKeys(reply.items), " not set within ",
                                                    FormatTimeout(timeout)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> TcpStore::Add(const std::string& key, int64_t delta) {
  ASSIGN_OR_RETURN(Reply reply, Call(kAdd, delta, {key}, IoLimit(timeout_)));
  return reply.arg;
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
  if (absl::Status status = Set(key, data); !status.ok()) Throw(status);
}

std::vector<char> TcpStore::get(const std::string& key) {
  absl::StatusOr<std::vector<char>> value = Get(key, timeout_);
  if (!value.ok()) Throw(value.status());
  return *std::move(value);
}

void TcpStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TcpStore::wait(const std::vector<std::string>& keys,
                    const std::chrono::milliseconds& timeout) {
  if (absl::Status status = Wait(keys, timeout); !status.ok()) Throw(status);
}

}  // namespace shardjit::runtime
