// A TCP key-value store for the rendezvous of the processes of a multi-process run: one process
// runs a TcpStoreServer, every process connects a TcpStore to it and hands it to Gloo (it
// implements gloo::rendezvous::Store). Keys are only ever added or overwritten, never removed.
//
// The protocol is small and binary, every integer little-endian. A request is a u32 command, a
// u32 item count, an i64 argument (a timeout in ms, 0 for none, or an Add's delta), then the
// items, each a u64 length and its bytes: SET [key, value], GET [key], WAIT [keys...],
// ADD [key]. A reply has the same shape: a u32 status (ok, timeout, error), a u32 item count, an
// i64 (an Add's result), then the items (the value of a GET, the keys a timed-out request still
// misses, or an error message). Messages over 1 GiB are malformed.
#ifndef SHARDJIT_RUNTIME_DISTRIBUTED_TCP_STORE_H_
#define SHARDJIT_RUNTIME_DISTRIBUTED_TCP_STORE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gloo/rendezvous/store.h"

namespace shardjit::runtime {

// Serves the store from memory to any number of clients, on one background thread that
// multiplexes every connection with poll(2). A GET or WAIT whose keys are missing is held on
// its connection (later requests on that connection wait behind it) until another client sets
// them or its timeout passes. A client that sends a malformed message or disconnects in the
// middle of one is dropped without affecting the others.
class TcpStoreServer {
 public:
  // Binds `host` ("" or "0.0.0.0" for every interface) at `port` (0: a free port) and starts
  // serving. Fails naming host and port if it cannot resolve the host or bind.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& host, int port);
  // Stops serving and closes every socket; held requests get no answer (their clients see the
  // connection close).
  ~TcpStoreServer();

  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  const std::string& host() const { return host_; }
  // The port it listens on (the one picked when started with port 0).
  int port() const { return port_; }
  // GET and WAIT requests held now, waiting for keys: for tests that must act once a client
  // waits, instead of sleeping until it probably does.
  int held_requests() const;

 private:
  class Loop;  // the state of the serving thread

  TcpStoreServer(std::string host, int port, int listen_fd, int wake_fd);

  const std::string host_;
  const int port_;
  const int listen_fd_;
  const int wake_fd_;  // an eventfd: written to wake the poll when stopping
  std::atomic<bool> stopping_{false};
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

// A client of a TcpStoreServer, usable from several threads: requests on its one connection
// take turns, so a Get or Wait that waits for keys holds up the other threads' requests (give
// each thread its own client where that matters). The absl::Status methods report every
// failure; the gloo::rendezvous::Store overrides wrap them and throw gloo::IoException with the
// same message, as Gloo's own stores do. A timeout of zero (gloo::kNoTimeout) waits without
// limit. After an I/O failure the connection is closed and every later request fails with the
// same error.
class TcpStore final : public gloo::rendezvous::Store {
 public:
  // Connects to the server at `host`:`port`, retrying until `timeout` passes (the server may
  // start later; zero: one attempt). `timeout` is also the default timeout of get() and wait()
  // and bounds how long set() and Add wait for their reply (beyond a grace period). Fails at
  // once if the host does not resolve; DeadlineExceeded naming the last error when no server
  // answers.
  static absl::StatusOr<std::unique_ptr<TcpStore>> Connect(const std::string& host, int port,
                                                           std::chrono::milliseconds timeout);
  // Attempts of Connect that found no server, in this process so far: for tests that start a
  // server once a client is known to be retrying, instead of sleeping until it probably is.
  static int64_t failed_attempts();
  ~TcpStore() override;

  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  // Sets `key` to `value`, waking the requests waiting for it.
  absl::Status Set(const std::string& key, const std::vector<char>& value);
  // The value of `key`, waiting up to `timeout` for it to be set; DeadlineExceeded naming the
  // key if it is not.
  absl::StatusOr<std::vector<char>> Get(const std::string& key, std::chrono::milliseconds timeout);
  // Waits up to `timeout` for every key of `keys` to be set; DeadlineExceeded naming the keys
  // still missing.
  absl::Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // Atomically adds `delta` to the counter at `key` (a missing key counts as 0) and returns the
  // new value. The counter is stored as decimal text: Get returns e.g. "42". Fails if the key
  // holds something else or the sum overflows.
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);

  // gloo::rendezvous::Store: the above with the default timeout, throwing gloo::IoException.
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // "host:port", as the errors name the store.
  const std::string& address() const { return address_; }
  std::chrono::milliseconds default_timeout() const { return timeout_; }

 private:
  struct Reply;

  TcpStore(std::string address, int fd, std::chrono::milliseconds timeout);

  // Sends one request and reads its reply, which must come within `io_limit` (zero: no limit).
  // An I/O failure closes the connection for good.
  absl::StatusOr<Reply> Call(uint32_t command, int64_t arg,
                             const std::vector<absl::string_view>& items,
                             std::chrono::milliseconds io_limit);
  // Closes the connection (mu_ held): every later request fails with `status`.
  absl::Status Break(absl::Status status);

  const std::string address_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  int fd_;               // guarded by mu_; -1 once the connection failed
  absl::Status broken_;  // guarded by mu_: why the connection was closed
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_DISTRIBUTED_TCP_STORE_H_
