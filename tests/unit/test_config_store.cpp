#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/config_store.hpp"
#include "bootstrap/wire.hpp"
#include "common/error.hpp"

namespace shmoe::bootstrap {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// gmock is not linked into the unit tests, hence no HasSubstr.
::testing::AssertionResult contains(const std::string& haystack, const std::string& needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "'" << haystack << "' does not contain '" << needle << "'";
}
#define EXPECT_CONTAINS(haystack, needle) EXPECT_TRUE(contains(haystack, needle))

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected shmoe::Error";
  return {};
}

class Store : public ::testing::Test {
 protected:
  void start(std::int32_t job_size = 0, std::size_t max_frame = 64u << 20) {
    ConfigStoreServer::Options o;
    o.job_size = job_size;
    o.max_frame = max_frame;
    server_ = std::make_unique<ConfigStoreServer>(o);
    server_->start();
    address_ = StoreAddress{"127.0.0.1", server_->port()};
  }
  void SetUp() override { start(); }
  // Restarts with other options; the fixture's default server is replaced.
  void restart(std::int32_t job_size, std::size_t max_frame = 64u << 20) {
    server_.reset();
    start(job_size, max_frame);
  }

  std::unique_ptr<ConfigStoreClient> tool() {
    return std::make_unique<ConfigStoreClient>(
        address_, Hello{PeerRole::kTool, -1, 0, ::getpid(), "testhost"}, 2000ms);
  }
  std::unique_ptr<ConfigStoreClient> pe(std::int32_t rank, std::int32_t size, std::int32_t pid = 0,
                                        std::string host = "testhost") {
    return std::make_unique<ConfigStoreClient>(
        address_, Hello{PeerRole::kPe, rank, size, pid != 0 ? pid : 1000 + rank, std::move(host)},
        2000ms);
  }

  // A plain socket, for speaking the protocol wrongly.
  int raw_connect() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(server_->port());
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    timeval tv{5, 0};  // a broken server must fail the test, not hang it
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
  }
  static void raw_send(int fd, std::string_view data) {
    ASSERT_EQ(::send(fd, data.data(), data.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(data.size()));
  }
  // Reads one reply frame; nullopt when the server closed the connection.
  static std::optional<std::pair<wire::Status, std::string>> raw_reply(int fd) {
    std::string buf;
    auto fill = [&](std::size_t n) {
      while (buf.size() < n) {
        char c[4096];
        ssize_t got = ::recv(fd, c, std::min(sizeof(c), n - buf.size()), 0);
        if (got <= 0) return false;
        buf.append(c, static_cast<std::size_t>(got));
      }
      return true;
    };
    if (!fill(wire::kHeaderSize)) return std::nullopt;
    auto h = wire::parse_header(reinterpret_cast<const std::uint8_t*>(buf.data()), 1 << 20);
    if (!fill(wire::kHeaderSize + h.length)) return std::nullopt;
    return std::make_pair(static_cast<wire::Status>(h.code), buf.substr(wire::kHeaderSize));
  }
  // True when the server closed the connection: EOF or reset, after any replies.
  static bool closed_by_server(int fd) {
    char c[256];
    while (true) {
      ssize_t n = ::recv(fd, c, sizeof(c), 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }
  static std::string tool_hello_frame() {
    wire::Writer w(static_cast<std::uint8_t>(wire::Op::kHello));
    w.u16(wire::kProtocolVersion).u8(static_cast<std::uint8_t>(PeerRole::kTool)).i32(-1).i32(0);
    w.i32(1).str("raw");
    return w.frame();
  }

  std::unique_ptr<ConfigStoreServer> server_;
  StoreAddress address_;
};

TEST(StoreAddressTest, ParsesHostsAndPorts) {
  auto a = StoreAddress::parse("127.0.0.1:7000");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 7000);
  EXPECT_EQ(a.str(), "127.0.0.1:7000");
  auto b = StoreAddress::parse("node-12.cluster:65535");
  EXPECT_EQ(b.host, "node-12.cluster");
  EXPECT_EQ(b.port, 65535);
  auto c = StoreAddress::parse("[::1]:1");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 1);
  EXPECT_EQ(c.str(), "[::1]:1");
}

TEST(StoreAddressTest, RejectsBadInputNamingIt) {
  for (std::string_view bad : {"", "host", "host:", ":80", "host:0", "host:65536", "host:8x",
                               "host:-1", "::1:80", "[::1]80", "[::1:80", "[]:80", "a b:80"}) {
    std::string msg = message_of([&] { StoreAddress::parse(bad, "SHMOE_STORE"); });
    EXPECT_CONTAINS(msg, "SHMOE_STORE") << bad;
    EXPECT_CONTAINS(msg, fmt::format("'{}'", bad)) << bad;
    EXPECT_CONTAINS(msg, "HOST:PORT") << bad;
  }
}

TEST_F(Store, SetGet) {
  auto c = tool();
  c->set("a", "1");
  c->set("b", std::string("\0x\xff", 3));
  EXPECT_EQ(c->get("a", 0ms), "1");
  EXPECT_EQ(c->get("b", 100ms), std::string("\0x\xff", 3));
  c->set("a", "2");
  EXPECT_EQ(tool()->get("a", 0ms), "2");
  EXPECT_EQ(c->get("missing", 0ms), std::nullopt);
}

TEST_F(Store, LargeValueRoundTrips) {
  // Larger than socket buffers, so the server must queue its reply and finish it on POLLOUT.
  std::string big(8u << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + (i >> 9));
  auto c = tool();
  c->set("big", big);
  EXPECT_EQ(c->get("big", 0ms), big);
}

TEST_F(Store, GetBlocksUntilAnotherClientSets) {
  auto waiter = tool();
  auto setter = tool();
  std::optional<std::string> got;
  Clock::duration waited{};
  std::thread t([&] {
    auto t0 = Clock::now();
    got = waiter->get("later", -1ms);
    waited = Clock::now() - t0;
  });
  std::this_thread::sleep_for(100ms);
  setter->set("later", "here");
  t.join();
  EXPECT_EQ(got, "here");
  EXPECT_GE(waited, 90ms);
}

TEST_F(Store, GetTimesOut) {
  auto c = tool();
  auto t0 = Clock::now();
  EXPECT_EQ(c->get("never", 100ms), std::nullopt);
  auto waited = Clock::now() - t0;
  EXPECT_GE(waited, 95ms);
  EXPECT_LT(waited, 2s);
  // The connection is still in step after a timeout.
  c->set("never", "now");
  EXPECT_EQ(c->get("never", 100ms), "now");
}

TEST_F(Store, HugeTimeoutsMeanForever) {
  ConfigStoreClient c(address_, Hello{PeerRole::kTool, -1, 0, 1, "h"},
                      std::chrono::milliseconds::max());
  std::optional<std::string> got;
  std::thread t([&] { got = c.get("late", std::chrono::milliseconds::max()); });
  std::this_thread::sleep_for(50ms);
  tool()->set("late", "v");
  t.join();
  EXPECT_EQ(got, "v");
}

TEST_F(Store, ParkedGetsExpireAtTheirOwnDeadlines) {
  std::vector<std::unique_ptr<ConfigStoreClient>> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(tool());
  const std::chrono::milliseconds timeouts[] = {300ms, 50ms, 150ms};
  Clock::duration waited[3];
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      auto t0 = Clock::now();
      EXPECT_EQ(clients[i]->get("nothing", timeouts[i]), std::nullopt);
      waited[i] = Clock::now() - t0;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 3; ++i) {
    EXPECT_GE(waited[i], timeouts[i] - 5ms) << i;
    EXPECT_LT(waited[i], timeouts[i] + 500ms) << i;
  }
}

TEST_F(Store, ConcurrentAddsAreExact) {
  constexpr int kThreads = 8;
  constexpr int kAdds = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto c = tool();
      for (int i = 0; i < kAdds; ++i) c->add("counter", 1);
    });
  }
  for (auto& t : threads) t.join();
  auto c = tool();
  EXPECT_EQ(c->add("counter", 0), kThreads * kAdds);
  EXPECT_EQ(c->get("counter", 0ms), std::to_string(kThreads * kAdds));
  EXPECT_EQ(c->add("counter", -8001), -1);
  EXPECT_EQ(c->add("fresh", -5), -5);
}

TEST_F(Store, OneClientSharedByThreads) {
  auto c = tool();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        c->add("shared", 1);
        std::string key = fmt::format("t{}", t);
        c->set(key, std::to_string(i));
        EXPECT_EQ(c->get(key, 0ms), std::to_string(i));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c->add("shared", 0), 800);
}

TEST_F(Store, AddOnNonIntegerIsRefused) {
  auto c = tool();
  c->set("text", "abc");
  EXPECT_CONTAINS(message_of([&] { c->add("text", 1); }), "not an integer");
  c->set("max", std::to_string(INT64_MAX));
  EXPECT_CONTAINS(message_of([&] { c->add("max", 1); }), "overflows");
  EXPECT_EQ(c->get("max", 0ms), std::to_string(INT64_MAX));
}

TEST_F(Store, AppendKeepsOrder) {
  auto c = tool();
  c->append("log", "a");
  c->append("log", "bc");
  c->append("log", "");
  c->append("log", "d");
  EXPECT_EQ(c->get("log", 0ms), "abcd");
}

TEST_F(Store, AppendWakesWaiter) {
  auto waiter = tool();
  std::optional<std::string> got;
  std::thread t([&] { got = waiter->get("app", 2000ms); });
  std::this_thread::sleep_for(50ms);
  tool()->append("app", "x");
  t.join();
  EXPECT_EQ(got, "x");
}

TEST_F(Store, CompareAndSwap) {
  auto c = tool();
  std::optional<std::string> current = "junk";
  // Absent and expected absent: swaps.
  EXPECT_TRUE(c->compare_and_swap("k", std::nullopt, "v1", &current));
  EXPECT_EQ(current, std::nullopt);
  // Present but expected absent: fails and reports the value.
  EXPECT_FALSE(c->compare_and_swap("k", std::nullopt, "v9", &current));
  EXPECT_EQ(current, "v1");
  // Wrong expectation.
  EXPECT_FALSE(c->compare_and_swap("k", "nope", "v9", &current));
  EXPECT_EQ(current, "v1");
  // Right expectation.
  EXPECT_TRUE(c->compare_and_swap("k", "v1", "v2", &current));
  EXPECT_EQ(current, "v1");
  EXPECT_EQ(c->get("k", 0ms), "v2");
  // Expected a value but the key is absent.
  EXPECT_FALSE(c->compare_and_swap("absent", "", "x", &current));
  EXPECT_EQ(current, std::nullopt);
  EXPECT_EQ(c->get("absent", 0ms), std::nullopt);
  // An empty value is not the same as absent.
  c->set("empty", "");
  EXPECT_TRUE(c->compare_and_swap("empty", "", "full"));
  EXPECT_EQ(c->get("empty", 0ms), "full");
}

TEST_F(Store, Remove) {
  auto c = tool();
  c->set("gone", "x");
  EXPECT_TRUE(c->remove("gone"));
  EXPECT_FALSE(c->remove("gone"));
  EXPECT_EQ(c->get("gone", 0ms), std::nullopt);
}

TEST_F(Store, JobStatus) {
  auto t = tool();
  JobStatus s = t->job_status();
  EXPECT_EQ(s.size, 0);
  EXPECT_TRUE(s.arrived.empty());
  auto p2 = pe(2, 3);
  auto p0 = pe(0, 3);
  p0->bye();
  s = t->job_status();
  EXPECT_EQ(s.size, 3);
  EXPECT_EQ(s.arrived, (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(s.departed, (std::vector<std::int32_t>{0}));
}

TEST_F(Store, DuplicateRankIsRefusedAndAborts) {
  auto first = pe(0, 2, 111, "hostA");
  std::string msg = message_of([&] { pe(0, 2, 222, "hostB"); });
  for (const char* part : {"rank 0", "pid 111", "hostA", "pid 222", "hostB"}) {
    EXPECT_CONTAINS(msg, part);
  }
  auto abort = tool()->get(kAbortKey, 1000ms);
  ASSERT_TRUE(abort.has_value());
  for (const char* part : {"rank 0", "pid 111", "hostA", "pid 222", "hostB"}) {
    EXPECT_CONTAINS(*abort, part);
  }
  // The first holder of the rank keeps working.
  first->set("still", "here");
  EXPECT_EQ(first->get("still", 0ms), "here");
}

TEST_F(Store, LearnedSizeMismatchIsRefusedAndAborts) {
  auto p0 = pe(0, 4);
  std::string msg = message_of([&] { pe(1, 3); });
  EXPECT_CONTAINS(msg, "PE 1");
  EXPECT_CONTAINS(msg, "3 PEs");
  EXPECT_CONTAINS(msg, "says 4");
  auto abort = tool()->get(kAbortKey, 1000ms);
  ASSERT_TRUE(abort.has_value());
  EXPECT_CONTAINS(*abort, "PE 1");
}

TEST_F(Store, ConfiguredSizeMismatchIsRefused) {
  restart(4);
  std::string msg = message_of([&] { pe(0, 5); });
  EXPECT_CONTAINS(msg, "5 PEs");
  EXPECT_CONTAINS(msg, "the launcher says 4");
  EXPECT_TRUE(tool()->get(kAbortKey, 0ms).has_value());
}

TEST_F(Store, RankOutsideJobIsRefused) {
  std::string msg = message_of([&] { pe(4, 4); });
  EXPECT_CONTAINS(msg, "PE 4");
  EXPECT_CONTAINS(msg, "0..3");
  EXPECT_CONTAINS(message_of([&] { pe(-1, 4); }), "outside");
  EXPECT_TRUE(tool()->get(kAbortKey, 0ms).has_value());
}

TEST_F(Store, PeClosingWithoutByeAborts) {
  auto watcher = tool();
  auto p0 = pe(0, 2);
  auto p1 = pe(1, 2, 4242, "node7");
  std::optional<std::string> abort;
  std::thread t([&] { abort = watcher->get(kAbortKey, 3000ms); });
  std::this_thread::sleep_for(50ms);
  p1.reset();
  t.join();
  ASSERT_TRUE(abort.has_value());
  EXPECT_CONTAINS(*abort, "PE 1 (pid 4242 on node7) disconnected without finalizing");
}

TEST_F(Store, PeDyingInsideBlockedGetAborts) {
  auto p0 = pe(0, 2);
  std::thread t([&] { EXPECT_THROW(p0->get("never", -1ms), Error); });
  std::this_thread::sleep_for(50ms);
  // What a killed process looks like to the server: its socket closes under a pending GET.
  p0->shutdown();
  t.join();
  auto abort = tool()->get(kAbortKey, 2000ms);
  ASSERT_TRUE(abort.has_value());
  EXPECT_CONTAINS(*abort, "PE 0");
  EXPECT_THROW(p0->set("x", "y"), Error);
}

TEST_F(Store, MonitorAndToolClosingDoNotAbort) {
  auto watcher = tool();
  {
    ConfigStoreClient monitor(address_, Hello{PeerRole::kMonitor, 0, 2, 1, "h"}, 1000ms);
    auto other = tool();
  }
  EXPECT_EQ(watcher->get(kAbortKey, 200ms), std::nullopt);
}

TEST_F(Store, ByeThenCloseDoesNotAbort) {
  auto watcher = tool();
  auto p0 = pe(0, 2);
  p0->bye();
  p0.reset();
  EXPECT_EQ(watcher->get(kAbortKey, 200ms), std::nullopt);
}

TEST_F(Store, OnlyTheFirstAbortIsKept) {
  auto watcher = tool();
  auto p0 = pe(0, 3);
  auto p1 = pe(1, 3);
  auto p2 = pe(2, 3);
  p2.reset();
  auto abort = watcher->get(kAbortKey, 2000ms);
  ASSERT_TRUE(abort.has_value());
  EXPECT_CONTAINS(*abort, "PE 2");
  p1.reset();
  watcher->set(kAbortKey, "a later explicit abort");
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(watcher->get(kAbortKey, 0ms), abort);
}

TEST_F(Store, FinalizedAfterEveryRankSaidBye) {
  auto watcher = tool();
  auto p0 = pe(0, 2);
  auto p1 = pe(1, 2);
  std::optional<std::string> fin;
  std::thread t([&] { fin = watcher->get(kFinalizedKey, 3000ms); });
  p1->bye();
  EXPECT_EQ(tool()->get(kFinalizedKey, 100ms), std::nullopt);
  p0->bye();
  t.join();
  EXPECT_EQ(fin, "1");
}

TEST_F(Store, RequestsBeforeHelloAreRefused) {
  int fd = raw_connect();
  wire::Writer set(static_cast<std::uint8_t>(wire::Op::kSet));
  set.str("k").str("v");
  raw_send(fd, set.frame());
  auto r = raw_reply(fd);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->first, wire::Status::kRefused);
  EXPECT_CONTAINS(r->second, "hello");
  EXPECT_EQ(tool()->get("k", 0ms), std::nullopt);
  // Still usable once it says hello.
  raw_send(fd, tool_hello_frame());
  r = raw_reply(fd);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->first, wire::Status::kOk);
  raw_send(fd, set.frame());
  r = raw_reply(fd);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->first, wire::Status::kOk);
  EXPECT_EQ(tool()->get("k", 0ms), "v");
  ::close(fd);
}

TEST_F(Store, WrongProtocolVersionIsRefused) {
  int fd = raw_connect();
  wire::Writer w(static_cast<std::uint8_t>(wire::Op::kHello));
  w.u16(wire::kProtocolVersion + 1).u8(3).i32(-1).i32(0).i32(1).str("raw");
  raw_send(fd, w.frame());
  auto r = raw_reply(fd);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->first, wire::Status::kRefused);
  EXPECT_CONTAINS(r->second, "protocol version");
  ::close(fd);
}

TEST_F(Store, MalformedFramesCloseOnlyThatConnection) {
  auto keeper = tool();
  keeper->set("alive", "yes");
  std::vector<std::string> bad;
  bad.push_back("GET / HTTP/1.1\r\nHost: x\r\n\r\n");  // bad magic
  {
    wire::Writer w(static_cast<std::uint8_t>(wire::Op::kSet));
    std::string f = w.frame();
    f.replace(4, 4, "\xFF\xFF\xFF\x7F", 4);  // absurd length
    bad.push_back(f);
  }
  {
    wire::Writer w(static_cast<std::uint8_t>(wire::Op::kSet));
    w.u32(1000).u8('x');  // string length beyond the frame
    bad.push_back(tool_hello_frame() + w.frame());
  }
  {
    wire::Writer w(200);  // unknown opcode
    bad.push_back(w.frame());
  }
  {
    wire::Writer w(static_cast<std::uint8_t>(wire::Op::kRemove));
    w.str("k").u8(0);  // trailing byte
    bad.push_back(tool_hello_frame() + w.frame());
  }
  for (std::size_t i = 0; i < bad.size(); ++i) {
    int fd = raw_connect();
    raw_send(fd, bad[i]);
    // Any reply is the hello's or the kBadRequest; then the server closes.
    std::optional<std::pair<wire::Status, std::string>> r;
    bool saw_bad_request = false;
    try {
      while ((r = raw_reply(fd))) {
        if (r->first == wire::Status::kBadRequest)
          saw_bad_request = true;
        else
          EXPECT_EQ(r->first, wire::Status::kOk) << i;
      }
    } catch (const wire::WireError&) {
      ADD_FAILURE() << "server sent a malformed frame for case " << i;
    }
    EXPECT_TRUE(saw_bad_request) << i;
    EXPECT_TRUE(closed_by_server(fd)) << i;
    ::close(fd);
    EXPECT_EQ(keeper->get("alive", 0ms), "yes") << i;
    EXPECT_EQ(tool()->get("alive", 0ms), "yes") << i;
  }
}

TEST_F(Store, OversizedRequestRejectedByClientFacingError) {
  restart(0, 1024);
  auto c = tool();
  EXPECT_CONTAINS(message_of([&] { c->set("k", std::string(2000, 'x')); }), "exceeds the limit");
  EXPECT_THROW(c->get("k", 0ms), Error);
  auto d = tool();
  d->set("k", "small");
  EXPECT_EQ(d->get("k", 0ms), "small");
}

TEST_F(Store, FramesSplitAcrossWritesAreReassembled) {
  int fd = raw_connect();
  wire::Writer set(static_cast<std::uint8_t>(wire::Op::kSet));
  set.str("split").str("value");
  std::string all = tool_hello_frame() + set.frame();
  for (char ch : all) {
    raw_send(fd, std::string_view(&ch, 1));
    std::this_thread::sleep_for(100us);
  }
  for (int i = 0; i < 2; ++i) {
    auto r = raw_reply(fd);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->first, wire::Status::kOk);
  }
  EXPECT_EQ(tool()->get("split", 0ms), "value");
  ::close(fd);
}

TEST_F(Store, PipelinedRequestsWaitBehindParkedGet) {
  int fd = raw_connect();
  wire::Writer get(static_cast<std::uint8_t>(wire::Op::kGet));
  get.str("pipe/k").i64(-1);
  wire::Writer set(static_cast<std::uint8_t>(wire::Op::kSet));
  set.str("pipe/x").str("1");
  raw_send(fd, tool_hello_frame() + get.frame() + set.frame());
  auto r = raw_reply(fd);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->first, wire::Status::kOk);
  auto other = tool();
  // The SET sits behind the GET, so replies keep the request order.
  EXPECT_EQ(other->get("pipe/x", 100ms), std::nullopt);
  other->set("pipe/k", "v");
  r = raw_reply(fd);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->first, wire::Status::kOk);
  EXPECT_EQ(wire::Reader(r->second).str(), "v");
  r = raw_reply(fd);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->first, wire::Status::kOk);
  EXPECT_EQ(other->get("pipe/x", 1000ms), "1");
  ::close(fd);
}

TEST_F(Store, ShutdownWakesBlockedGet) {
  auto c = tool();
  std::string msg;
  std::thread t([&] { msg = message_of([&] { c->get("never", -1ms); }); });
  std::this_thread::sleep_for(50ms);
  c->shutdown();
  t.join();
  EXPECT_CONTAINS(msg, "shut down");
  EXPECT_THROW(c->set("a", "b"), Error);
}

TEST_F(Store, ServerStopEndsBlockedGet) {
  auto c = tool();
  std::string msg;
  std::thread t([&] { msg = message_of([&] { c->get("never", -1ms); }); });
  std::this_thread::sleep_for(50ms);
  server_->stop();
  t.join();
  EXPECT_CONTAINS(msg, fmt::format("config store at {} closed the connection", address_.str()));
}

TEST(StoreConnect, UnreachableAddressThrowsInTime) {
  // A port that was just free: nothing listens there.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  socklen_t len = sizeof(sa);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  StoreAddress addr{"127.0.0.1", ntohs(sa.sin_port)};
  auto t0 = Clock::now();
  std::string msg = message_of([&] {
    ConfigStoreClient c(addr, Hello{PeerRole::kTool, -1, 0, 1, "h"}, 300ms);
  });
  auto waited = Clock::now() - t0;
  EXPECT_CONTAINS(msg, "cannot reach the config store at " + addr.str());
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 2s);
}

TEST(StoreConnect, ClientMayStartBeforeServer) {
  // Reserve a port, release it, and start the server on it while the client is retrying.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  socklen_t len = sizeof(sa);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  std::uint16_t port = ntohs(sa.sin_port);
  std::unique_ptr<ConfigStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(200ms);
    ConfigStoreServer::Options o;
    o.port = port;
    server = std::make_unique<ConfigStoreServer>(o);
    server->start();
  });
  ConfigStoreClient c(StoreAddress{"127.0.0.1", port}, Hello{PeerRole::kTool, -1, 0, 1, "h"},
                      5000ms);
  starter.join();
  c.set("k", "v");
  EXPECT_EQ(c.get("k", 0ms), "v");
}

TEST_F(Store, BarrierHoldsEveryoneUntilAllArrive) {
  restart(4);
  constexpr int kRounds = 20;
  std::atomic<int> arrived[kRounds] = {};
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      auto c = pe(r, 4);
      StoreCollectives coll(*c, r, 4);
      for (int round = 0; round < kRounds; ++round) {
        // Stagger arrivals so an early leaver would be caught.
        if (round % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10 * r));
        arrived[round].fetch_add(1);
        coll.barrier("test", 5000ms);
        EXPECT_EQ(arrived[round].load(), 4) << "rank " << r << " round " << round;
      }
      c->bye();
    });
  }
  for (auto& t : threads) t.join();
}

TEST_F(Store, AllgatherCollectsByRank) {
  restart(4);
  std::vector<std::vector<std::string>> results(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      auto c = pe(r, 4);
      StoreCollectives coll(*c, r, 4);
      // Reverse-staggered, so append order differs from rank order.
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * (3 - r)));
      results[r] =
          coll.allgather("ep", fmt::format("endpoint-of-{}", r) + std::string(r, '\0'), 5000ms);
      // A second round under the same name must not see the first one's data.
      auto again = coll.allgather("ep", std::to_string(r * r), 5000ms);
      EXPECT_EQ(again, (std::vector<std::string>{"0", "1", "4", "9"}));
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(results[r].size(), 4u);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(results[r][i], fmt::format("endpoint-of-{}", i) + std::string(i, '\0'));
    }
  }
}

TEST_F(Store, BarrierTimeoutListsMissingRanks) {
  restart(4);
  std::string msgs[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto c = pe(r, 4);
      StoreCollectives coll(*c, r, 4);
      msgs[r] = message_of([&] { coll.barrier("startup", 200ms); });
      c->bye();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& m : msgs) {
    EXPECT_CONTAINS(m, "startup: timed out after 0.2 s waiting for PEs 2, 3");
    EXPECT_CONTAINS(m, "arrived: 0, 1");
  }
}

TEST_F(Store, BarrierTimeoutWithEveryoneConnectedSaysSo) {
  restart(4);
  std::vector<std::unique_ptr<ConfigStoreClient>> clients;
  for (int r = 0; r < 4; ++r) clients.push_back(pe(r, 4));
  std::string msgs[3];
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      StoreCollectives coll(*clients[r], r, 4);
      msgs[r] = message_of([&] { coll.barrier("sync", 200ms); });
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& m : msgs) {
    EXPECT_CONTAINS(m, "3 of 4");
    EXPECT_CONTAINS(m, "unknown");
  }
  for (auto& c : clients) c->bye();
}

}  // namespace
}  // namespace shmoe::bootstrap
