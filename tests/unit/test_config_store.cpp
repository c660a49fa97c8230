#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
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
#include "bootstrap/store_auth.hpp"
#include "bootstrap/wire.hpp"
#include "common/error.hpp"
#include "common/settings.hpp"

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

const JobKey& test_key() {
  static const JobKey key = JobKey::parse("unit-test-job-key-0123456789abcdef", "test key");
  return key;
}
const JobKey& other_key() {
  static const JobKey key = JobKey::parse("another-job-key-fedcba9876543210ff", "test key");
  return key;
}

Hello hello_of(PeerRole role, std::int32_t rank, std::int32_t size, std::int32_t pid,
               std::string host, const JobKey& key = test_key()) {
  return Hello{role, rank, size, pid, std::move(host), key};
}

class Store : public ::testing::Test {
 protected:
  void start(std::int32_t job_size = 0, StoreLimits limits = {}) {
    ConfigStoreServer::Options o;
    o.job_size = job_size;
    o.job_key = test_key();
    o.limits = limits;
    server_ = std::make_unique<ConfigStoreServer>(o);
    server_->start();
    address_ = StoreAddress{"127.0.0.1", server_->port()};
  }
  void SetUp() override { start(); }
  // Restarts with other options; the fixture's default server is replaced.
  void restart(std::int32_t job_size, StoreLimits limits = {}) {
    server_.reset();
    start(job_size, limits);
  }

  std::unique_ptr<ConfigStoreClient> tool(const JobKey& key = test_key()) {
    return std::make_unique<ConfigStoreClient>(
        address_, hello_of(PeerRole::kTool, -1, 0, ::getpid(), "testhost", key), 2000ms);
  }
  std::unique_ptr<ConfigStoreClient> pe(std::int32_t rank, std::int32_t size, std::int32_t pid = 0,
                                        std::string host = "testhost",
                                        const JobKey& key = test_key()) {
    return std::make_unique<ConfigStoreClient>(
        address_,
        hello_of(PeerRole::kPe, rank, size, pid != 0 ? pid : 1000 + rank, std::move(host), key),
        2000ms);
  }

  // A plain socket, for speaking the protocol wrongly. The server's challenge is read into
  // `nonce` (when given) or discarded.
  int raw_connect(std::string* nonce = nullptr) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(server_->port());
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    timeval tv{5, 0};  // a broken server must fail the test, not hang it
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    auto challenge = raw_reply(fd);
    EXPECT_TRUE(challenge.has_value());
    if (challenge) {
      EXPECT_EQ(challenge->first, wire::Status::kChallenge);
      wire::Reader rd(challenge->second);
      EXPECT_EQ(rd.u16(), wire::kProtocolVersion);
      std::string n(rd.str());
      EXPECT_EQ(n.size(), auth::kNonceBytes);
      if (nonce != nullptr) *nonce = std::move(n);
    }
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
  // A hello as ConfigStoreClient makes it, answering the challenge `nonce`. `signing_key` makes
  // the mac (a wrong one for the tests of refusals); `job_id` is what the hello claims.
  static std::string hello_frame(std::string_view nonce, const Hello& h,
                                 const JobKey& signing_key = test_key(),
                                 std::optional<std::string> job_id = std::nullopt) {
    wire::Writer w(static_cast<std::uint8_t>(wire::Op::kHello));
    w.u16(wire::kProtocolVersion)
        .u8(static_cast<std::uint8_t>(h.role))
        .i32(h.rank)
        .i32(h.size)
        .i32(h.pid)
        .str(h.host)
        .str(job_id.value_or(test_key().job_id()))
        .str(std::string(auth::kNonceBytes, 'c'));
    w.str(
        auth::hello_mac(signing_key, nonce, std::string_view(w.frame()).substr(wire::kHeaderSize)));
    return w.frame();
  }
  static std::string tool_hello_frame(std::string_view nonce) {
    return hello_frame(nonce, hello_of(PeerRole::kTool, -1, 0, 1, "raw"));
  }
  // Connects and says a valid tool hello, whose OK it reads.
  int raw_tool() {
    std::string nonce;
    int fd = raw_connect(&nonce);
    raw_send(fd, tool_hello_frame(nonce));
    auto r = raw_reply(fd);
    EXPECT_TRUE(r.has_value());
    if (r) {
      EXPECT_EQ(r->first, wire::Status::kOk);
    }
    return fd;
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
  ConfigStoreClient c(address_, hello_of(PeerRole::kTool, -1, 0, 1, "h"),
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
    ConfigStoreClient monitor(address_, hello_of(PeerRole::kMonitor, 0, 2, 1, "h"), 1000ms);
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
  // Nothing more is read from a connection that has not proved the key.
  EXPECT_TRUE(closed_by_server(fd));
  ::close(fd);
  EXPECT_EQ(tool()->get("k", 0ms), std::nullopt);
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
  EXPECT_TRUE(closed_by_server(fd));
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
  // "HELLO" stands for a valid hello, which needs the connection's own challenge.
  constexpr std::string_view kHello = "HELLO";
  {
    wire::Writer w(static_cast<std::uint8_t>(wire::Op::kSet));
    w.u32(1000).u8('x');  // string length beyond the frame
    bad.push_back(std::string(kHello) + w.frame());
  }
  {
    wire::Writer w(static_cast<std::uint8_t>(wire::Op::kHello));
    w.u16(wire::kProtocolVersion).u8(1).i32(0).u32(5000);  // a hello cut short
    bad.push_back(w.frame());
  }
  {
    wire::Writer w(200);  // unknown opcode
    bad.push_back(w.frame());
  }
  {
    wire::Writer w(static_cast<std::uint8_t>(wire::Op::kRemove));
    w.str("k").u8(0);  // trailing byte
    bad.push_back(std::string(kHello) + w.frame());
  }
  for (std::size_t i = 0; i < bad.size(); ++i) {
    std::string nonce;
    int fd = raw_connect(&nonce);
    std::string bytes = bad[i];
    if (bytes.starts_with(kHello)) bytes.replace(0, kHello.size(), tool_hello_frame(nonce));
    raw_send(fd, bytes);
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

TEST_F(Store, OversizedFrameRejectedByClientFacingError) {
  StoreLimits limits;
  limits.max_value = 4096;
  restart(0, limits);
  auto c = tool();
  // Past the frame limit (a value's limit plus room for the rest of the request).
  EXPECT_CONTAINS(message_of([&] { c->set("k", std::string(200'000, 'x')); }), "exceeds the limit");
  EXPECT_THROW(c->get("k", 0ms), Error);
  auto d = tool();
  d->set("k", "small");
  EXPECT_EQ(d->get("k", 0ms), "small");
}

TEST_F(Store, FramesSplitAcrossWritesAreReassembled) {
  std::string nonce;
  int fd = raw_connect(&nonce);
  wire::Writer set(static_cast<std::uint8_t>(wire::Op::kSet));
  set.str("split").str("value");
  std::string all = tool_hello_frame(nonce) + set.frame();
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
  std::string nonce;
  int fd = raw_connect(&nonce);
  wire::Writer get(static_cast<std::uint8_t>(wire::Op::kGet));
  get.str("pipe/k").i64(-1);
  wire::Writer set(static_cast<std::uint8_t>(wire::Op::kSet));
  set.str("pipe/x").str("1");
  raw_send(fd, tool_hello_frame(nonce) + get.frame() + set.frame());
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
  std::string msg = message_of(
      [&] { ConfigStoreClient c(addr, hello_of(PeerRole::kTool, -1, 0, 1, "h"), 300ms); });
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
    o.job_key = test_key();
    server = std::make_unique<ConfigStoreServer>(o);
    server->start();
  });
  ConfigStoreClient c(StoreAddress{"127.0.0.1", port}, hello_of(PeerRole::kTool, -1, 0, 1, "h"),
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
    EXPECT_CONTAINS(m,
                    "startup: timed out after 0.2 s waiting for PEs 2, 3, which never "
                    "connected to the config store (2 of 4 PEs connected: 0, 1)");
    EXPECT_CONTAINS(m, "of 4 PEs reached this barrier");
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

// --- Only the job's own processes get in, and nothing else disturbs the job ---------------

// A job of two PEs, running, that every refusal below must leave as it was.
class RunningJob : public Store {
 protected:
  void SetUp() override {
    Store::SetUp();
    restart(2);
    p0_ = pe(0, 2, 100, "hostA");
    p1_ = pe(1, 2, 101, "hostB");
    p0_->set("job/segment-of-0", "shm-name-0");
  }
  // The job goes on: its PEs still work, nothing aborted it, the ranks are still theirs.
  void expect_job_unaffected() {
    EXPECT_EQ(p1_->get("job/segment-of-0", 0ms), "shm-name-0");
    p1_->set("job/still", "running");
    EXPECT_EQ(p0_->get("job/still", 0ms), "running");
    EXPECT_EQ(p0_->get(kAbortKey, 0ms), std::nullopt);
    JobStatus s = p0_->job_status();
    EXPECT_EQ(s.size, 2);
    EXPECT_EQ(s.arrived, (std::vector<std::int32_t>{0, 1}));
    EXPECT_TRUE(s.departed.empty());
  }
  void TearDown() override {
    p0_->bye();
    p1_->bye();
  }
  std::unique_ptr<ConfigStoreClient> p0_, p1_;
};

TEST_F(RunningJob, WrongKeyIsRefusedWithoutTouchingTheJob) {
  // The right job id, but a mac made with another key: what guessing the key looks like.
  for (PeerRole role : {PeerRole::kPe, PeerRole::kMonitor, PeerRole::kTool}) {
    std::string nonce;
    int fd = raw_connect(&nonce);
    raw_send(fd, hello_frame(nonce, hello_of(role, 0, 2, 666, "stranger"), other_key()));
    auto r = raw_reply(fd);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->first, wire::Status::kRefused);
    EXPECT_CONTAINS(r->second, fmt::format("did not prove the key of job {}", test_key().job_id()));
    EXPECT_TRUE(closed_by_server(fd));
    ::close(fd);
  }
  // Without any key, ConfigStoreClient itself refuses to try.
  settings::set(kJobKeyVariable, std::nullopt);
  EXPECT_CONTAINS(message_of([&] {
                    ConfigStoreClient c(address_, hello_of(PeerRole::kTool, -1, 0, 1, "h", {}),
                                        1000ms);
                  }),
                  "no job key (SHMOE_JOB_KEY is not set)");
  expect_job_unaffected();
}

TEST_F(RunningJob, ReplayedOrAlteredHelloIsRefused) {
  // A hello recorded on one connection (here, made by a process that knows the key)...
  std::string nonce_a;
  int a = raw_connect(&nonce_a);
  const std::string recorded = hello_frame(nonce_a, hello_of(PeerRole::kPe, 1, 2, 777, "hostB"));
  // ...does not open another, whose challenge differs: not even while the first is unused.
  std::string nonce_b;
  int b = raw_connect(&nonce_b);
  ASSERT_NE(nonce_a, nonce_b);
  raw_send(b, recorded);
  auto r = raw_reply(b);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->first, wire::Status::kRefused);
  EXPECT_CONTAINS(r->second, "did not prove the key");
  EXPECT_TRUE(closed_by_server(b));
  ::close(b);
  // A hello whose fields changed after it was signed fails too (rank 1 -> 0, in place).
  std::string altered = recorded;
  const std::size_t rank_at = wire::kHeaderSize + 2 + 1;
  altered[rank_at] = 0;
  raw_send(a, altered);
  r = raw_reply(a);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->first, wire::Status::kRefused);
  EXPECT_TRUE(closed_by_server(a));
  ::close(a);
  // Duplicate rank 1 from a process without the key aborted nothing.
  expect_job_unaffected();
}

TEST_F(RunningJob, OtherJobIsRefusedByName) {
  std::string msg = message_of([&] { pe(1, 2, 4242, "hostC", other_key()); });
  EXPECT_CONTAINS(msg, fmt::format("PE 1 (pid 4242 on hostC) belongs to job {}, but this config "
                                   "store serves job {}",
                                   other_key().job_id(), test_key().job_id()));
  EXPECT_NE(other_key().job_id(), test_key().job_id());
  // A PE of another job with another size or a rank beyond this job changes nothing either.
  EXPECT_CONTAINS(message_of([&] { pe(5, 8, 1, "hostC", other_key()); }), "belongs to job");
  EXPECT_CONTAINS(message_of([&] { tool(other_key()); }), "a tool (pid");
  expect_job_unaffected();
}

TEST_F(RunningJob, StrangersCannotReadWriteOrAbort) {
  // What an intruder would try without a valid hello: requests straight away, including the
  // abort key and the segment records, and malformed hellos that used to abort the job.
  std::vector<std::string> attempts;
  {
    wire::Writer w(static_cast<std::uint8_t>(wire::Op::kSet));
    w.str(kAbortKey).str("intruder was here");
    attempts.push_back(w.frame());
  }
  {
    wire::Writer w(static_cast<std::uint8_t>(wire::Op::kGet));
    w.str("job/segment-of-0").i64(0);
    attempts.push_back(w.frame());
  }
  {
    wire::Writer w(static_cast<std::uint8_t>(wire::Op::kStatus));
    attempts.push_back(w.frame());
  }
  {
    // A PE hello of the old format: wrong size, duplicate rank.
    wire::Writer w(static_cast<std::uint8_t>(wire::Op::kHello));
    w.u16(1).u8(1).i32(0).i32(3).i32(1).str("x");
    attempts.push_back(w.frame());
  }
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    int fd = raw_connect();
    raw_send(fd, attempts[i]);
    auto r = raw_reply(fd);
    ASSERT_TRUE(r.has_value()) << i;
    EXPECT_EQ(r->first, wire::Status::kRefused) << i;
    EXPECT_EQ(r->second.find("shm-name-0"), std::string::npos) << i;
    EXPECT_TRUE(closed_by_server(fd)) << i;
    ::close(fd);
  }
  expect_job_unaffected();
}

TEST_F(RunningJob, DuplicateRankFromTheJobStillAborts) {
  // A process that knows the key and claims a taken rank is the job's own misconfiguration.
  EXPECT_CONTAINS(message_of([&] { pe(1, 2, 555, "hostC"); }), "two processes claim PE rank 1");
  auto abort = p0_->get(kAbortKey, 1000ms);
  ASSERT_TRUE(abort.has_value());
  EXPECT_CONTAINS(*abort, "pid 101 on hostB");
}

TEST(StoreConnect, StoreThatDoesNotKnowTheKeyIsNotTrusted) {
  // Something that listens where the store should be and answers every hello with OK.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof(sa);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len);
  std::thread impostor([listener] {
    int fd = ::accept(listener, nullptr, nullptr);
    wire::Writer challenge(static_cast<std::uint8_t>(wire::Status::kChallenge));
    challenge.u16(wire::kProtocolVersion).str(std::string(auth::kNonceBytes, 'n'));
    const std::string& c = challenge.frame();
    EXPECT_EQ(::send(fd, c.data(), c.size(), MSG_NOSIGNAL), static_cast<ssize_t>(c.size()));
    char buf[4096];
    (void)::recv(fd, buf, sizeof(buf), 0);  // the hello
    wire::Writer ok(static_cast<std::uint8_t>(wire::Status::kOk));
    ok.str(std::string(auth::kMacBytes, 'p'));
    const std::string& o = ok.frame();
    EXPECT_EQ(::send(fd, o.data(), o.size(), MSG_NOSIGNAL), static_cast<ssize_t>(o.size()));
    ::close(fd);
  });
  std::string msg = message_of([&] {
    ConfigStoreClient c(StoreAddress{"127.0.0.1", ntohs(sa.sin_port)},
                        hello_of(PeerRole::kPe, 0, 2, 1, "h"), 2000ms);
  });
  impostor.join();
  ::close(listener);
  EXPECT_CONTAINS(msg, fmt::format("does not know the key of job {}", test_key().job_id()));
}

TEST(StoreServer, RefusesToRunWithoutAKey) {
  ConfigStoreServer::Options o;
  EXPECT_CONTAINS(message_of([&] { ConfigStoreServer s(o); }), "no job key");
}

TEST(JobKeyTest, GeneratedKeysAreFreshAndUserKeysChecked) {
  JobKey a = JobKey::generate(), b = JobKey::generate();
  EXPECT_EQ(a.text().size(), 32u);
  EXPECT_EQ(a.text().find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
  EXPECT_NE(a.job_id(), b.job_id());
  EXPECT_EQ(a.job_id().size(), 12u);
  EXPECT_EQ(JobKey::parse(a.text(), "k").job_id(), a.job_id());
  EXPECT_CONTAINS(message_of([] { JobKey::parse("short", "SHMOE_JOB_KEY"); }),
                  "SHMOE_JOB_KEY has 5 characters; a job key needs 32 to 1024");
  std::string blank(40, 'k');
  blank[7] = ' ';
  std::string msg = message_of([&] { JobKey::parse(blank, "SHMOE_JOB_KEY"); });
  EXPECT_CONTAINS(msg, "position 7");
  EXPECT_EQ(msg.find(blank), std::string::npos);  // a secret is never echoed
}

// --- Bounded memory ------------------------------------------------------------------------

StoreLimits small_limits() {
  StoreLimits limits;
  limits.max_value = 4096;
  limits.max_total = 64u << 10;
  return limits;
}

TEST_F(RunningJob, OversizeValueIsRefusedAndOnlyThatConnectionDropped) {
  restart(2, small_limits());
  p0_ = pe(0, 2, 100, "hostA");
  p1_ = pe(1, 2, 101, "hostB");
  p0_->set("job/segment-of-0", "shm-name-0");
  auto writer = tool();
  EXPECT_CONTAINS(message_of([&] { writer->set("big", std::string(5000, 'v')); }),
                  "SET would make the value of key 'big' 5000 bytes, over the limit of 4096 "
                  "bytes per value (SHMOE_STORE_MAX_VALUE)");
  EXPECT_THROW(writer->get("big", 0ms), Error);  // dropped
  // APPEND is bounded by what the value would grow to.
  auto appender = tool();
  appender->append("log", std::string(3000, 'a'));
  EXPECT_CONTAINS(message_of([&] { appender->append("log", std::string(3000, 'b')); }),
                  "APPEND would make the value of key 'log' 6000 bytes");
  EXPECT_EQ(tool()->get("log", 0ms), std::string(3000, 'a'));
  // And CAS by what it would store.
  auto swapper = tool();
  EXPECT_CONTAINS(
      message_of([&] { swapper->compare_and_swap("cas", std::nullopt, std::string(4097, 'c')); }),
      "CAS would make the value of key 'cas' 4097 bytes");
  EXPECT_EQ(tool()->get("cas", 0ms), std::nullopt);
  expect_job_unaffected();
}

TEST_F(RunningJob, TotalIsBoundedAndTheJobGoesOn) {
  const StoreLimits limits = small_limits();
  restart(2, limits);
  p0_ = pe(0, 2, 100, "hostA");
  p1_ = pe(1, 2, 101, "hostB");
  p0_->set("job/segment-of-0", "shm-name-0");
  auto flooder = tool();
  std::string refused;
  int stored = 0;
  try {
    for (; stored < 100; ++stored) {
      flooder->set(fmt::format("flood/{}", stored), std::string(4000, 'f'));
    }
  } catch (const Error& e) {
    refused = e.what();
  }
  EXPECT_CONTAINS(refused, "over its limit of 65536 bytes (SHMOE_STORE_MAX_TOTAL)");
  EXPECT_GE(stored, 10);
  EXPECT_LE(stored * 4000, 65536);
  EXPECT_LE(server_->usage().stored_bytes, limits.max_total);
  EXPECT_THROW(flooder->get("flood/0", 0ms), Error);  // dropped
  auto reader = tool();
  EXPECT_EQ(reader->get("flood/0", 0ms), std::string(4000, 'f'));
  // What the job needs still fits once a key is gone; the limit counts what is stored now.
  EXPECT_TRUE(reader->remove("flood/0"));
  expect_job_unaffected();
}

TEST_F(RunningJob, PeOverTheLimitEndsTheJobSayingWhy) {
  restart(2, small_limits());
  p0_ = pe(0, 2, 100, "hostA");
  p1_ = pe(1, 2, 101, "hostB");
  EXPECT_CONTAINS(message_of([&] { p1_->set("huge", std::string(5000, 'h')); }),
                  "over the limit of 4096");
  auto abort = p0_->get(kAbortKey, 2000ms);
  ASSERT_TRUE(abort.has_value());
  EXPECT_CONTAINS(*abort,
                  "PE 1 (pid 101 on hostB) was cut off by the config store: SET would "
                  "make the value of key 'huge' 5000 bytes");
  p1_ = pe(1, 2, 102, "hostB");  // for TearDown's bye
}

TEST(StoreLimitsTest, EnvironmentOverridesAndIsChecked) {
  settings::set("SHMOE_STORE_MAX_VALUE", "1M");
  settings::set("SHMOE_STORE_MAX_TOTAL", "8M");
  StoreLimits limits = StoreLimits::from_environment();
  EXPECT_EQ(limits.max_value, 1u << 20);
  EXPECT_EQ(limits.max_total, 8u << 20);
  settings::set("SHMOE_STORE_MAX_TOTAL", "512K");
  EXPECT_CONTAINS(message_of([] { StoreLimits::from_environment(); }),
                  "SHMOE_STORE_MAX_TOTAL=524288 is below SHMOE_STORE_MAX_VALUE=1048576");
  settings::set("SHMOE_STORE_MAX_VALUE", "10");
  EXPECT_CONTAINS(message_of([] { StoreLimits::from_environment(); }),
                  "SHMOE_STORE_MAX_VALUE=10 is outside the allowed range");
  settings::set("SHMOE_STORE_MAX_VALUE", std::nullopt);
  settings::set("SHMOE_STORE_MAX_TOTAL", std::nullopt);
  limits = StoreLimits::from_environment();
  EXPECT_EQ(limits.max_value, StoreLimits::kDefaultMaxValue);
  EXPECT_EQ(limits.max_total, StoreLimits::kDefaultMaxTotal);
}

TEST_F(Store, CollectivesRemoveTheirFinishedRounds) {
  restart(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      auto c = pe(r, 3);
      StoreCollectives coll(*c, r, 3);
      for (int round = 0; round < 50; ++round) {
        auto all = coll.allgather("grow", fmt::format("{}:{}", r, round), 5000ms);
        for (int p = 0; p < 3; ++p) EXPECT_EQ(all[p], fmt::format("{}:{}", p, round));
      }
      coll.barrier("end", 5000ms);
      c->bye();
    });
  }
  for (auto& t : threads) t.join();
  // 50 allgathers with their barriers made 150 keys; only the last rounds' may remain, and the
  // store's only other key is kFinalizedKey.
  EXPECT_LE(server_->usage().keys, 7u);
}

// --- Out of file descriptors ----------------------------------------------------------------

// Lowers this process's RLIMIT_NOFILE and fills every free descriptor with /dev/null, so that
// the store's next accept() fails with EMFILE; undone on destruction.
class DescriptorsExhausted {
 public:
  DescriptorsExhausted() {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit low = saved_;
    low.rlim_cur = static_cast<rlim_t>(highest_open_fd() + 32);
    ::setrlimit(RLIMIT_NOFILE, &low);
    limit_ = static_cast<int>(low.rlim_cur);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers_.push_back(fd);
  }
  ~DescriptorsExhausted() {
    for (int fd : fillers_) ::close(fd);
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  int limit() const { return limit_; }

 private:
  static int highest_open_fd() {
    int highest = 2;
    DIR* d = ::opendir("/proc/self/fd");
    if (d == nullptr) return 64;
    while (dirent* e = ::readdir(d)) highest = std::max(highest, std::atoi(e->d_name));
    ::closedir(d);
    return highest;
  }
  rlimit saved_{};
  int limit_ = 0;
  std::vector<int> fillers_;
};

// Collects what this process writes to stderr while it lives.
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    saved_ = ::dup(2);
    EXPECT_EQ(::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK), 0);
    ::dup2(pipe_[1], 2);
  }
  ~StderrCapture() { restore(); }
  std::string restore() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      ::dup2(saved_, 2);
      ::close(saved_);
      saved_ = -1;
      ::close(pipe_[1]);
      char buf[4096];
      for (ssize_t n; (n = ::read(pipe_[0], buf, sizeof buf)) > 0;) text_.append(buf, n);
      ::close(pipe_[0]);
    }
    return text_;
  }

 private:
  int saved_ = -1;
  int pipe_[2] = {-1, -1};
  std::string text_;
};

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

bool greeted_within(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 1;
}

TEST_F(Store, OutOfDescriptorsIsSaidOnceNamedAndEndsTheStart) {
  restart(4);
  auto p0 = pe(0, 4);
  StoreCollectives coll(*p0, 0, 4);
  // Made before the descriptors run out: connecting them then takes no new descriptor here.
  int clients[3];
  for (int& fd : clients) fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(server_->port());
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  StderrCapture captured;
  std::string barrier, abort;
  int limit = 0;
  {
    DescriptorsExhausted exhausted;
    limit = exhausted.limit();
    // The kernel completes each connection, but the store cannot accept it: no greeting comes.
    for (int fd : clients) {
      ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
      EXPECT_FALSE(greeted_within(fd, 300));
    }
    barrier = message_of([&] { coll.barrier("startup", 300ms); });
    // While the job is starting, the store gives up after a few seconds and says why.
    abort = p0->get(kAbortKey, 8000ms).value_or("(no abort)");
  }
  // With descriptors back, the store accepts the waiting connections and greets them.
  for (int fd : clients) {
    EXPECT_TRUE(greeted_within(fd, 2000));
    ::close(fd);
  }
  auto t = tool();
  t->set("back", "yes");
  EXPECT_EQ(t->get("back", 0ms), "yes");
  EXPECT_TRUE(t->job_status().store_trouble.empty());
  const std::string log = captured.restore();
  const std::string named = fmt::format("all {} file descriptors its RLIMIT_NOFILE allows", limit);
  EXPECT_EQ(count_of(log, "cannot accept connections"), 1) << log;
  EXPECT_CONTAINS(log, named);
  EXPECT_CONTAINS(log, "a job of 4 PEs needs about");
  EXPECT_CONTAINS(log, "ulimit -n");
  EXPECT_CONTAINS(log, "accepting connections again");
  EXPECT_CONTAINS(barrier, "waiting for PEs 1-3, which never connected");
  EXPECT_CONTAINS(barrier, "the config store reports: the config store cannot accept");
  EXPECT_CONTAINS(barrier, named);
  EXPECT_CONTAINS(abort, named);
}

TEST(StoreConnect, SilentListenerIsNamedAfterTheGreetingWait) {
  // A listener that never accepts: what a store out of descriptors looks like to a client.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof(sa);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len);
  const auto t0 = Clock::now();
  std::string msg = message_of([&] {
    ConfigStoreClient c(StoreAddress{"127.0.0.1", ntohs(sa.sin_port)},
                        hello_of(PeerRole::kPe, 0, 2, 1, "h"), 200ms);
  });
  const auto waited = Clock::now() - t0;
  ::close(listener);
  EXPECT_CONTAINS(msg, "accepted the connection but sent no greeting within 1.0 s");
  EXPECT_CONTAINS(msg, "out of file descriptors");
  EXPECT_GE(waited, 950ms);
  EXPECT_LT(waited, 5s);
}

}  // namespace
}  // namespace shmoe::bootstrap
