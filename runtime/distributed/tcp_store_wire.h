// The wire format and socket helpers shared by the TCP store's server (tcp_store_server.cc) and
// client (tcp_store.cc); the protocol itself is described in tcp_store.h. Internal to them.
#ifndef SHARDJIT_RUNTIME_DISTRIBUTED_TCP_STORE_WIRE_H_
#define SHARDJIT_RUNTIME_DISTRIBUTED_TCP_STORE_WIRE_H_

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "fmt/format.h"

namespace shardjit::runtime::tcp_store_wire {


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
inline std::string ErrnoText(int err) {
  std::string text = std::error_code(err, std::generic_category()).message();
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

inline std::string HostPort(absl::string_view host, int port) {
  if (host.find(':') != absl::string_view::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

inline std::string FormatTimeout(std::chrono::milliseconds timeout) {
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

inline void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
inline void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
inline uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}
inline uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

// The size of a message with `items`.
inline uint64_t EncodedSize(const std::vector<absl::string_view>& items) {
  uint64_t size = kHeaderBytes;
  for (absl::string_view item : items) size += kLengthBytes + item.size();
  return size;
}

// Appends a message to `out`.
inline void Encode(uint32_t code, int64_t arg, const std::vector<absl::string_view>& items,
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
inline absl::StatusOr<bool> WaitReady(int fd, short events, Deadline deadline) {
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
inline std::string DescribeKeys(const std::vector<std::string>& keys) {
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

}  // namespace shardjit::runtime::tcp_store_wire

#endif  // SHARDJIT_RUNTIME_DISTRIBUTED_TCP_STORE_WIRE_H_
