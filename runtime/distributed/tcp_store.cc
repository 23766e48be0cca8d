#include "runtime/distributed/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "fmt/format.h"
#include "gloo/common/error.h"

namespace shardjit::runtime {
namespace {

using Clock = std::chrono::steady_clock;
// A point in time; kNever for none.
using Deadline = Clock::time_point;
constexpr Deadline kNever = Deadline::max();

// Request commands and reply statuses: the first u32 of a message.
enum Command : uint32_t { kSet = 1, kGet = 2, kWait = 3, kAdd = 4 };
enum ReplyStatus : uint32_t { kOk = 0, kTimeout = 1, kError = 2 };

constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 30;
constexpr uint32_t kMaxItems = 1 << 20;
constexpr size_t kHeaderBytes = 16;  // code, item count, argument
constexpr size_t kLengthBytes = 8;
constexpr size_t kChunkBytes = 64 << 10;  // read at most this much at a time
// Timeouts from this on (about 31 years) are taken as none.
constexpr int64_t kMaxTimeoutMs = int64_t{1} << 40;
// How long past a request's own timeout the client waits for its reply.
constexpr std::chrono::milliseconds kReplySlack = std::chrono::seconds(10);
// The server stops reading a connection while this much output to it waits to be sent.
constexpr size_t kMaxPendingOutput = 64 << 20;
// How long the server stops accepting when it runs out of file descriptors.
constexpr std::chrono::milliseconds kAcceptPause{100};

// strerror's text, starting lowercase to read well inside a sentence.
std::string ErrnoText(int err) {
  std::string text = std::error_code(err, std::generic_category()).message();
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

std::string HostPort(absl::string_view host, int port) {
  if (host.find(':') != absl::string_view::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

std::string FormatTimeout(std::chrono::milliseconds timeout) {
  return absl::FormatDuration(absl::Milliseconds(timeout.count()));
}

// Closes a file descriptor when it goes out of scope, unless released.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) close(fd_);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

// The size of a message with `items`.
uint64_t EncodedSize(const std::vector<absl::string_view>& items) {
  uint64_t size = kHeaderBytes;
  for (absl::string_view item : items) size += kLengthBytes + item.size();
  return size;
}

// Appends a message to `out`.
void Encode(uint32_t code, int64_t arg, const std::vector<absl::string_view>& items,
            std::string& out) {
  out.reserve(out.size() + EncodedSize(items));
  PutU32(out, code);
  PutU32(out, static_cast<uint32_t>(items.size()));
  PutU64(out, static_cast<uint64_t>(arg));
  for (absl::string_view item : items) {
    PutU64(out, item.size());
    out.append(item.data(), item.size());
  }
}

// A request or a reply: its command or status, its argument and its items.
struct Message {
  uint32_t code = 0;
  int64_t arg = 0;
  std::vector<std::string> items;
};

// Reassembles messages from a byte stream arriving in pieces. It holds no more memory than the
// bytes that arrived (a length is never allocated before its bytes come), and fails on codes
// outside [min_code, max_code], more than kMaxItems items or messages over kMaxMessageBytes.
class MessageReader {
 public:
  MessageReader(uint32_t min_code, uint32_t max_code) : min_code_(min_code), max_code_(max_code) {}

  // Consumes `data`, appending the messages it completes to `done`. After an error (naming
  // what is malformed) the reader must not be used again.
  absl::Status Feed(const char* data, size_t size, std::deque<Message>& done) {
    while (size > 0) {
      if (!in_message_) {
        const size_t take = std::min(size, kHeaderBytes - header_have_);
        std::memcpy(header_ + header_have_, data, take);
        header_have_ += take;
        data += take;
        size -= take;
        if (header_have_ < kHeaderBytes) break;
        header_have_ = 0;
        current_ = Message{};
        current_.code = GetU32(header_);
        items_left_ = GetU32(header_ + 4);
        current_.arg = static_cast<int64_t>(GetU64(header_ + 8));
        if (current_.code < min_code_ || current_.code > max_code_) {
          return absl::InvalidArgumentError(fmt::format("unknown code {}", current_.code));
        }
        if (items_left_ > kMaxItems) {
          return absl::InvalidArgumentError(
              fmt::format("{} items, more than the {} allowed", items_left_, kMaxItems));
        }
        message_bytes_ = kHeaderBytes + uint64_t{items_left_} * kLengthBytes;
        if (items_left_ == 0) {
          done.push_back(std::move(current_));
        } else {
          in_message_ = true;
          in_item_ = false;
        }
        continue;
      }
      if (!in_item_) {
        const size_t take = std::min(size, kLengthBytes - length_have_);
        std::memcpy(length_ + length_have_, data, take);
        length_have_ += take;
        data += take;
        size -= take;
        if (length_have_ < kLengthBytes) break;
        length_have_ = 0;
        const uint64_t length = GetU64(length_);
        if (length > kMaxMessageBytes - message_bytes_) {
          return absl::InvalidArgumentError(
              fmt::format("an item of {} bytes makes the message larger than {} bytes", length,
                          kMaxMessageBytes));
        }
        message_bytes_ += length;
        item_left_ = length;
        current_.items.emplace_back();
        current_.items.back().reserve(std::min<uint64_t>(length, kChunkBytes));
        in_item_ = true;
      }
      const size_t take = std::min<uint64_t>(size, item_left_);
      current_.items.back().append(data, take);
      item_left_ -= take;
      data += take;
      size -= take;
      if (item_left_ > 0) break;
      in_item_ = false;
      if (--items_left_ == 0) {
        done.push_back(std::move(current_));
        in_message_ = false;
      }
    }
    return absl::OkStatus();
  }

  // Whether no message is partly read.
  bool idle() const { return !in_message_ && header_have_ == 0; }

 private:
  const uint32_t min_code_;
  const uint32_t max_code_;
  char header_[kHeaderBytes];
  size_t header_have_ = 0;
  bool in_message_ = false;
  Message current_;
  uint32_t items_left_ = 0;  // including the one being read
  uint64_t message_bytes_ = 0;
  char length_[kLengthBytes];
  size_t length_have_ = 0;
  bool in_item_ = false;
  uint64_t item_left_ = 0;
};

// Waits until `fd` is ready for `events` (or failed): false if `deadline` passes first.
absl::StatusOr<bool> WaitReady(int fd, short events, Deadline deadline) {
  while (true) {
    int timeout_ms = -1;
    if (deadline != kNever) {
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) return false;
      timeout_ms = static_cast<int>(
          std::min<int64_t>(std::chrono::ceil<std::chrono::milliseconds>(left).count(), INT_MAX));
    }
    pollfd pfd{fd, events, 0};
    const int n = poll(&pfd, 1, timeout_ms);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return absl::InternalError("poll: " + ErrnoText(errno));
  }
}

// "key [a]" or "keys [a, b]", escaping unprintable bytes and listing at most 16.
std::string DescribeKeys(const std::vector<std::string>& keys) {
  constexpr size_t kMaxListed = 16;
  std::vector<std::string> listed;
  for (size_t i = 0; i < keys.size() && i < kMaxListed; ++i) {
    listed.push_back(absl::CHexEscape(keys[i]));
  }
  if (keys.size() > kMaxListed) {
    listed.push_back(fmt::format("... {} more", keys.size() - kMaxListed));
  }
  return absl::StrCat(keys.size() == 1 ? "key [" : "keys [", absl::StrJoin(listed, ", "), "]");
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Server

class TcpStoreServer::Loop {
 public:
  Loop(int listen_fd, int wake_fd, const std::atomic<bool>* stopping)
      : listen_fd_(listen_fd), wake_fd_(wake_fd), stopping_(stopping), buffer_(kChunkBytes) {}
  ~Loop() {
    for (auto& [id, conn] : conns_) close(conn->fd);
  }

  // Serves until `stopping` is set and the wake fd written.
  void Run();

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

// ------------------------------------------------------------------------------------------
// Client

struct TcpStore::Reply {
  uint32_t status = kOk;
  int64_t arg = 0;
  std::vector<std::string> items;
};

namespace {

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
    }
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, left));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      where, ": no answer within ", FormatTimeout(timeout), " (", ErrnoText(err), ")"));
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
  absl::StatusOr<Reply> reply = Call(kGet, timeout.count(), {key}, IoLimit(timeout));
  if (!reply.ok()) return reply.status();
  if (reply->status == kTimeout) {
    return absl::DeadlineExceededError(absl::StrCat("TCP store at ", address_, ": ",
                                                    DescribeKeys({key}), " not set within ",
                                                    FormatTimeout(timeout)));
  }
  if (reply->items.size() != 1) {
    return absl::InternalError(absl::StrCat("TCP store at ", address_, ": reply to GET of key ",
                                            absl::CHexEscape(key), " has ", reply->items.size(),
                                            " items"));
  }
  const std::string& value = reply->items[0];
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
  absl::StatusOr<Reply> reply = Call(kWait, timeout.count(), items, IoLimit(timeout));
  if (!reply.ok()) return reply.status();
  if (reply->status == kTimeout) {
    return absl::DeadlineExceededError(absl::StrCat("TCP store at ", address_, ": ",
                                                    DescribeKeys(reply->items), " not set within ",
                                                    FormatTimeout(timeout)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> TcpStore::Add(const std::string& key, int64_t delta) {
  absl::StatusOr<Reply> reply = Call(kAdd, delta, {key}, IoLimit(timeout_));
  if (!reply.ok()) return reply.status();
  return reply->arg;
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
