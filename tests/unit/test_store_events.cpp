// Events the config store pushes for watched keys (kWatch), and one connection shared by a thread
// that waits for them and threads that make requests meanwhile: what a PE's one connection does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/config_store.hpp"
#include "common/error.hpp"

namespace shmoe::bootstrap {
namespace {

using namespace std::chrono_literals;

class PushedEvents : public ::testing::Test {
 protected:
  void SetUp() override {
    ConfigStoreServer::Options o;
    o.job_key = JobKey::parse("unit-test-job-key-0123456789abcdef", "test key");
    key_ = o.job_key;
    server_ = std::make_unique<ConfigStoreServer>(o);
    server_->start();
  }
  std::unique_ptr<ConfigStoreClient> client() {
    return std::make_unique<ConfigStoreClient>(
        StoreAddress{"127.0.0.1", server_->port()},
        Hello{PeerRole::kTool, -1, 0, static_cast<std::int32_t>(::getpid()), "h", key_}, 2000ms);
  }
  // Waits up to 10 s for `n` events on `c`.
  static std::vector<StoreEvent> collect(ConfigStoreClient& c, std::size_t n) {
    std::vector<StoreEvent> all;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (all.size() < n && std::chrono::steady_clock::now() < deadline) {
      for (StoreEvent& e : c.wait_for_events(-1, 200ms).events) all.push_back(std::move(e));
    }
    return all;
  }

  JobKey key_;
  std::unique_ptr<ConfigStoreServer> server_;
};

TEST_F(PushedEvents, WatchedKeyIsPushedWhenSet) {
  auto watcher = client();
  auto writer = client();
  watcher->watch("k");
  EXPECT_TRUE(watcher->wait_for_events(-1, 100ms).events.empty());
  writer->set("k", "v1");
  auto got = collect(*watcher, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].key, "k");
  EXPECT_EQ(got[0].value, "v1");
  // One event per watch: a second value is not pushed unless watched again.
  writer->set("k", "v2");
  EXPECT_TRUE(watcher->wait_for_events(-1, 200ms).events.empty());
  watcher->watch("k");
  got = collect(*watcher, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].value, "v2");
}

TEST_F(PushedEvents, KeyWithAValueIsPushedAtOnce) {
  auto c = client();
  c->set("present", "already");
  c->watch("present");
  auto got = collect(*c, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].value, "already");
}

TEST_F(PushedEvents, OtherDescriptorEndsTheWait) {
  auto c = client();
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  EXPECT_FALSE(c->wait_for_events(p[0], 50ms).other_ready);
  ASSERT_EQ(::write(p[1], "x", 1), 1);
  EXPECT_TRUE(c->wait_for_events(p[0], 5000ms).other_ready);
  ::close(p[0]);
  ::close(p[1]);
}

// Requests from other threads go on while one thread waits for events, and the events that a
// requester reads on the way to its replies reach the waiting thread.
TEST_F(PushedEvents, RequestsShareTheConnectionWithTheWaitingThread) {
  auto c = client();
  auto writer = client();
  constexpr int kKeys = 8;
  for (int k = 0; k < kKeys; ++k) c->watch("w" + std::to_string(k));
  std::vector<StoreEvent> got;  // the waiter's until joined
  std::thread waiter([&] { got = collect(*c, kKeys); });
  std::vector<std::thread> requesters;
  for (int t = 0; t < 3; ++t) {
    requesters.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string key = "r" + std::to_string(t);
        EXPECT_EQ(c->add(key, 1), i + 1);
        if (i % 25 == 0) writer->set("w" + std::to_string((t * 3 + i / 25) % kKeys), "x");
      }
    });
  }
  for (auto& r : requesters) r.join();
  // A request blocked at the server (requests on one connection go one at a time) while the
  // watched keys are set: the requester reads their events on the way to its reply.
  std::thread blocked([&] { EXPECT_EQ(c->get("late", 5000ms), "here"); });
  std::this_thread::sleep_for(50ms);
  for (int k = 0; k < kKeys; ++k) writer->set("w" + std::to_string(k), "v" + std::to_string(k));
  writer->set("late", "here");
  blocked.join();
  waiter.join();
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kKeys));
  std::vector<bool> seen(kKeys, false);
  for (const StoreEvent& e : got) {
    ASSERT_EQ(e.key.substr(0, 1), "w");
    const int k = std::stoi(e.key.substr(1));
    EXPECT_FALSE(seen[k]) << e.key << " pushed twice";
    seen[k] = true;
  }
}

TEST_F(PushedEvents, LostConnectionEndsTheWaitWithAnError) {
  auto c = client();
  std::thread t([&] { EXPECT_THROW(c->wait_for_events(-1, -1ms), Error); });
  std::this_thread::sleep_for(50ms);
  server_.reset();
  t.join();
}

TEST_F(PushedEvents, TooManyWatchesDropTheConnection) {
  auto c = client();
  for (int k = 0; k < 16; ++k) c->watch("never" + std::to_string(k));
  EXPECT_THROW(c->watch("one-too-many"), Error);
  EXPECT_THROW(c->set("x", "y"), Error);
}

}  // namespace
}  // namespace shmoe::bootstrap
