#include "runtime/distributed/tcp_store.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit::runtime {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kLong{5000};

std::vector<char> Bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

milliseconds Since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
}

std::unique_ptr<TcpStoreServer> StartServer() {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::Start("127.0.0.1", 0);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

// Waits until `server` holds `count` GET or WAIT requests waiting for keys; fails after 30 s.
void WaitUntilHeld(const TcpStoreServer& server, int count) {
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
  while (server.held_requests() != count) {
    ASSERT_LT(Clock::now(), deadline)
        << "the server holds " << server.held_requests() << " requests, not " << count
        << ", after 30 s";
    std::this_thread::yield();
  }
}

std::unique_ptr<TcpStore> ConnectTo(const TcpStoreServer& server, milliseconds timeout = kLong) {
  absl::StatusOr<std::unique_ptr<TcpStore>> store =
      TcpStore::Connect("127.0.0.1", server.port(), timeout);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

// A port nobody listens on right now: bound to port 0, then released.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t size = sizeof(addr);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size), 0);
  close(fd);
  return ntohs(addr.sin_port);
}

// A raw socket connected to the server, to send it broken messages.
int RawConnect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
  return fd;
}

void AppendLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// A request as the protocol spells it (see tcp_store.h).
std::string RawRequest(uint32_t command, int64_t arg, const std::vector<std::string>& items) {
  std::string out;
  AppendLe(out, command, 4);
  AppendLe(out, items.size(), 4);
  AppendLe(out, static_cast<uint64_t>(arg), 8);
  for (const std::string& item : items) {
    AppendLe(out, item.size(), 8);
    out += item;
  }
  return out;
}

void SendRaw(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// Whether the server closes `fd` within `timeout` (reading and discarding what it sends).
bool ClosedByPeer(int fd, milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  char buffer[256];
  while (Clock::now() < deadline) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, 50) <= 0) continue;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return true;
  }
  return false;
}

TEST(TcpStore, SetGetRoundTrip) {
  auto server = StartServer();
  auto store = ConnectTo(*server);
  ASSERT_NE(store, nullptr);
  const std::vector<char> binary = {'\0', 'a', '\0', '\xff', '\x80', '\0'};
  std::vector<char> big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + (i >> 9));
  ASSERT_TRUE(store->Set("hello", Bytes("world")).ok());
  ASSERT_TRUE(store->Set("empty", {}).ok());
  ASSERT_TRUE(store->Set("binary", binary).ok());
  ASSERT_TRUE(store->Set(std::string("key\0with\0zeros", 14), Bytes("z")).ok());
  ASSERT_TRUE(store->Set("big", big).ok());

  EXPECT_EQ(*store->Get("hello", kLong), Bytes("world"));
  absl::StatusOr<std::vector<char>> empty = store->Get("empty", kLong);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(*store->Get("binary", kLong), binary);
  EXPECT_EQ(*store->Get(std::string("key\0with\0zeros", 14), kLong), Bytes("z"));
  EXPECT_EQ(*store->Get("big", kLong), big);

  ASSERT_TRUE(store->Set("hello", Bytes("again")).ok());  // overwrites
  EXPECT_EQ(*store->Get("hello", kLong), Bytes("again"));
  // Another client sees the same map; the Gloo API agrees.
  auto other = ConnectTo(*server);
  EXPECT_EQ(other->get("binary"), binary);
  other->set("from_other", Bytes("x"));
  EXPECT_EQ(store->get("from_other"), Bytes("x"));
}

TEST(TcpStore, GetBlocksUntilAnotherClientSetsTheKey) {
  auto server = StartServer();
  auto reader = ConnectTo(*server);
  auto writer = ConnectTo(*server);
  const Clock::time_point start = Clock::now();
  std::thread setter([&] {
    WaitUntilHeld(*server, 1);  // the GET waits at the server
    ASSERT_TRUE(writer->Set("late", Bytes("arrived")).ok());
  });
  absl::StatusOr<std::vector<char>> value = reader->Get("late", kLong);
  const milliseconds elapsed = Since(start);
  setter.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, Bytes("arrived"));
  EXPECT_EQ(server->held_requests(), 0);
  EXPECT_LT(elapsed.count(), 3000);
  // The held connection serves the next request as usual.
  EXPECT_EQ(reader->get("late"), Bytes("arrived"));
}

TEST(TcpStore, WaitForSeveralKeys) {
  auto server = StartServer();
  auto waiter = ConnectTo(*server);
  auto writer = ConnectTo(*server);
  ASSERT_TRUE(writer->Set("a", Bytes("1")).ok());
  std::thread setter([&] {
    WaitUntilHeld(*server, 1);  // the WAIT waits at the server for b, c and d
    for (const char* key : {"b", "c"}) {
      ASSERT_TRUE(writer->Set(key, Bytes(key)).ok());
      // Served after the SET, so after the server counted `key` off the WAIT.
      ASSERT_TRUE(writer->Get(key, kLong).ok());
      EXPECT_EQ(server->held_requests(), 1) << "the WAIT was answered once " << key << " was set";
    }
    ASSERT_TRUE(writer->Set("d", Bytes("d")).ok());
  });
  absl::Status status = waiter->Wait({"a", "b", "c", "b", "d"}, kLong);
  setter.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(server->held_requests(), 0);
  // Keys already there: at once, also through the Gloo API.
  const Clock::time_point again = Clock::now();
  EXPECT_NO_THROW(waiter->wait({"a", "b", "c", "d"}));
  EXPECT_NO_THROW(waiter->wait({"d"}, milliseconds(200)));
  EXPECT_TRUE(waiter->Wait({}, milliseconds(200)).ok());
  EXPECT_LT(Since(again).count(), 500);
}

TEST(TcpStore, GetTimesOutNamingTheKey) {
  auto server = StartServer();
  auto store = ConnectTo(*server);
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::vector<char>> value = store->Get("missing", milliseconds(200));
  const milliseconds elapsed = Since(start);
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(value.status().message(), HasSubstr("key [missing] not set within 200ms"));
  EXPECT_THAT(value.status().message(), HasSubstr(absl::StrCat("127.0.0.1:", server->port())));
  EXPECT_GE(elapsed.count(), 190);
  EXPECT_LT(elapsed.count(), 1500);
  // The connection stays usable after a timeout.
  ASSERT_TRUE(store->Set("missing", Bytes("now")).ok());
  EXPECT_EQ(*store->Get("missing", milliseconds(200)), Bytes("now"));
}

TEST(TcpStore, WaitTimesOutNamingTheMissingKeys) {
  auto server = StartServer();
  auto store = ConnectTo(*server);
  ASSERT_TRUE(store->Set("a", Bytes("1")).ok());
  const Clock::time_point start = Clock::now();
  absl::Status status = store->Wait({"a", "b", "c"}, milliseconds(200));
  const milliseconds elapsed = Since(start);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(status.message(), HasSubstr("keys [b, c] not set within 200ms"));
  EXPECT_GE(elapsed.count(), 190);
  EXPECT_LT(elapsed.count(), 1500);
}

TEST(TcpStore, GlooApiThrowsIoExceptionOnTimeout) {
  auto server = StartServer();
  auto store = ConnectTo(*server, milliseconds(200));  // also get()'s and wait()'s timeout
  const Clock::time_point start = Clock::now();
  try {
    store->get("nope");
    ADD_FAILURE() << "get() of a missing key returned";
  } catch (const gloo::IoException& e) {
    EXPECT_THAT(e.what(), HasSubstr("key [nope] not set within 200ms"));
  }
  EXPECT_GE(Since(start).count(), 190);
  try {
    store->wait({"x", "y"}, milliseconds(100));
    ADD_FAILURE() << "wait() for missing keys returned";
  } catch (const gloo::IoException& e) {
    EXPECT_THAT(e.what(), HasSubstr("keys [x, y] not set within 100ms"));
  }
  EXPECT_THROW(store->wait({"z"}), gloo::IoException);
  EXPECT_LT(Since(start).count(), 3000);
}

TEST(TcpStore, AddFromEightClientsSumsCorrectly) {
  auto server = StartServer();
  constexpr int kThreads = 8;
  constexpr int kAdds = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&server] {
      auto store = ConnectTo(*server);
      for (int i = 0; i < kAdds; ++i) ASSERT_TRUE(store->Add("counter", 1).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  auto store = ConnectTo(*server);
  EXPECT_EQ(*store->Add("counter", 0), kThreads * kAdds);
  EXPECT_EQ(*store->Get("counter", kLong), Bytes(std::to_string(kThreads * kAdds)));
  EXPECT_EQ(*store->Add("counter", -800), 0);
  EXPECT_EQ(*store->Add("fresh", -5), -5);

  // One client shared by eight threads: requests take turns on its connection.
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&store] {
      for (int i = 0; i < kAdds; ++i) ASSERT_TRUE(store->Add("shared", 2).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(*store->Add("shared", 0), 2 * kThreads * kAdds);

  ASSERT_TRUE(store->Set("text", Bytes("abc")).ok());
  absl::StatusOr<int64_t> bad = store->Add("text", 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(), HasSubstr("key text is not an integer"));
  ASSERT_TRUE(store->Set("max", Bytes(std::to_string(INT64_MAX))).ok());
  EXPECT_THAT(store->Add("max", 1).status().message(), HasSubstr("overflows"));
  EXPECT_EQ(*store->Add("counter", 1), 1);  // the connection is still fine
}

TEST(TcpStore, AddWakesWaiters) {
  auto server = StartServer();
  auto waiter = ConnectTo(*server);
  auto adder = ConnectTo(*server);
  std::thread add([&] {
    WaitUntilHeld(*server, 1);  // the WAIT waits at the server
    ASSERT_TRUE(adder->Add("arrived", 1).ok());
  });
  EXPECT_TRUE(waiter->Wait({"arrived"}, kLong).ok());
  add.join();
}

TEST(TcpStore, ConnectsBeforeTheServerStarts) {
  const int port = FreePort();
  std::unique_ptr<TcpStoreServer> server;
  const int64_t failed = TcpStore::failed_attempts();
  std::thread starter([&] {
    // Starts the server once the client found none: it is retrying.
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
    while (TcpStore::failed_attempts() == failed) {
      ASSERT_LT(Clock::now(), deadline) << "no attempt to connect within 30 s";
      std::this_thread::yield();
    }
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> started =
        TcpStoreServer::Start("127.0.0.1", port);
    ASSERT_TRUE(started.ok()) << started.status();
    server = *std::move(started);
  });
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::unique_ptr<TcpStore>> store = TcpStore::Connect("127.0.0.1", port, kLong);
  const milliseconds elapsed = Since(start);
  starter.join();
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_GT(TcpStore::failed_attempts(), failed);  // it connected after failing
  EXPECT_LT(elapsed.count(), 3000);
  ASSERT_TRUE((*store)->Set("k", Bytes("v")).ok());
  EXPECT_EQ(*(*store)->Get("k", kLong), Bytes("v"));
  EXPECT_EQ(server->port(), port);
}

TEST(TcpStore, ConnectToAPortNobodyServesFailsAfterTheTimeout) {
  const int port = FreePort();
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::unique_ptr<TcpStore>> store =
      TcpStore::Connect("127.0.0.1", port, milliseconds(300));
  const milliseconds elapsed = Since(start);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(store.status().message(),
            absl::StrCat("TCP store at 127.0.0.1:", port,
                         ": no answer within 300ms (connection refused)"));
  EXPECT_GE(elapsed.count(), 290);
  EXPECT_LT(elapsed.count(), 2000);
}

TEST(TcpStore, UnresolvableHostFailsAtOnce) {
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::unique_ptr<TcpStore>> store =
      TcpStore::Connect("no-such-host.invalid", 29500, kLong);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store.status().message(),
              HasSubstr("TCP store at no-such-host.invalid:29500: cannot resolve host "
                        "'no-such-host.invalid'"));
  EXPECT_LT(Since(start).count(), 2000);
}

TEST(TcpStoreServer, StartFailsNamingHostAndPort) {
  auto server = StartServer();
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> again =
      TcpStoreServer::Start("127.0.0.1", server->port());
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.status().message(), HasSubstr(absl::StrCat("127.0.0.1:", server->port(),
                                                               ": cannot bind (address "
                                                               "already in use)")));
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> bad_host =
      TcpStoreServer::Start("no-such-host.invalid", 0);
  ASSERT_FALSE(bad_host.ok());
  EXPECT_THAT(bad_host.status().message(),
              HasSubstr("no-such-host.invalid:0: cannot resolve host 'no-such-host.invalid'"));
}

TEST(TcpStoreServer, ClientsThatBreakOffDoNotDisturbTheOthers) {
  auto server = StartServer();
  auto good = ConnectTo(*server);
  ASSERT_TRUE(good->Set("before", Bytes("1")).ok());

  // Hangs up in the middle of a SET.
  const std::string set = RawRequest(1, 0, {"half", std::string(1000, 'x')});
  int fd = RawConnect(server->port());
  SendRaw(fd, set.substr(0, set.size() / 2));
  close(fd);
  // Stays connected with half a message sent.
  const int stalled = RawConnect(server->port());
  SendRaw(stalled, set.substr(0, 20));
  // Sends a length over the limit: the server hangs up on it.
  int oversized = RawConnect(server->port());
  std::string huge = RawRequest(1, 0, {});
  huge[4] = 2;  // two items
  AppendLe(huge, uint64_t{3} << 30, 8);
  SendRaw(oversized, huge);
  EXPECT_TRUE(ClosedByPeer(oversized, milliseconds(2000)));
  close(oversized);
  // An unknown command.
  int unknown = RawConnect(server->port());
  SendRaw(unknown, RawRequest(99, 0, {"k"}));
  EXPECT_TRUE(ClosedByPeer(unknown, milliseconds(2000)));
  close(unknown);
  // Hangs up while its GET waits for a key.
  fd = RawConnect(server->port());
  SendRaw(fd, RawRequest(2, 0, {"later"}));
  WaitUntilHeld(*server, 1);
  close(fd);
  WaitUntilHeld(*server, 0);  // the server dropped it, and its GET

  ASSERT_TRUE(good->Set("later", Bytes("2")).ok());
  EXPECT_EQ(*good->Get("before", kLong), Bytes("1"));
  EXPECT_EQ(*good->Get("later", kLong), Bytes("2"));
  EXPECT_FALSE(good->Get("half", milliseconds(50)).ok());
  auto fresh = ConnectTo(*server);
  EXPECT_EQ(*fresh->Get("later", kLong), Bytes("2"));
  close(stalled);
}

TEST(TcpStoreServer, PipelinedRequestsOnARawSocketAreAnsweredInOrder) {
  auto server = StartServer();
  const int fd = RawConnect(server->port());
  // A GET that waits, then a SET on the same connection: the SET waits behind the GET.
  SendRaw(fd, RawRequest(2, 0, {"k"}) + RawRequest(1, 0, {"mine", "v"}));
  auto other = ConnectTo(*server);
  EXPECT_FALSE(other->Get("mine", milliseconds(100)).ok());
  ASSERT_TRUE(other->Set("k", Bytes("value")).ok());
  EXPECT_EQ(*other->Get("mine", kLong), Bytes("v"));
  // Replies: GET's (ok, one item "value"), then SET's (ok, no items).
  std::string expected;
  AppendLe(expected, 0, 4);
  AppendLe(expected, 1, 4);
  AppendLe(expected, 0, 8);
  AppendLe(expected, 5, 8);
  expected += "value";
  expected.append(16, '\0');
  std::string got;
  char buffer[256];
  while (got.size() < expected.size()) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    ASSERT_GT(n, 0);
    got.append(buffer, n);
  }
  EXPECT_EQ(got, expected);
  close(fd);
}

TEST(TcpStoreServer, StoppingWakesWaitingClients) {
  auto server = StartServer();
  auto store = ConnectTo(*server);
  std::thread stopper([&] {
    WaitUntilHeld(*server, 1);  // the GET waits at the server
    server.reset();
  });
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::vector<char>> value = store->Get("never", kLong);
  stopper.join();
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(value.status().message(), HasSubstr("connection closed by the server"));
  EXPECT_LT(Since(start).count(), 2000);
  // The connection is gone for good.
  EXPECT_EQ(store->Set("k", {}).code(), absl::StatusCode::kUnavailable);
  EXPECT_THROW(store->set("k", {}), gloo::IoException);
}

TEST(TcpStore, WorksThroughGloosPrefixStore) {
  auto server = StartServer();
  auto store = ConnectTo(*server);
  gloo::rendezvous::PrefixStore prefixed("job7", *store);
  prefixed.set("rank0", Bytes("addr0"));
  EXPECT_EQ(prefixed.get("rank0"), Bytes("addr0"));
  EXPECT_EQ(*store->Get("job7/rank0", kLong), Bytes("addr0"));

  auto other = ConnectTo(*server);
  gloo::rendezvous::PrefixStore other_prefixed("job7", *other);
  std::thread setter([&] {
    WaitUntilHeld(*server, 1);  // the wait for rank1 waits at the server
    other_prefixed.set("rank1", Bytes("addr1"));
  });
  EXPECT_NO_THROW(prefixed.wait({"rank0", "rank1"}, milliseconds(5000)));
  setter.join();
  EXPECT_EQ(prefixed.get("rank1"), Bytes("addr1"));
  EXPECT_THROW(prefixed.wait({"rank2"}, milliseconds(50)), gloo::IoException);
}

}  // namespace
}  // namespace shardjit::runtime
