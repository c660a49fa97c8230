// SHMOE_PE_LOSS=continue: the config store's view of a PE that closes without goodbye (lost, not
// the job's end), the keys that say so and that only the store may write, the PE's set of lost
// PEs, and waits for a lost PE, which end naming it instead of waiting for the hang timeout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/config_store.hpp"
#include "bootstrap/job_liveness.hpp"
#include "common/backoff.hpp"
#include "common/error.hpp"
#include "common/pe_loss.hpp"
#include "common/settings.hpp"
#include "common/wait_registry.hpp"

namespace shmoe {
namespace {

using namespace std::chrono_literals;
using bootstrap::ConfigStoreClient;
using bootstrap::ConfigStoreServer;
using bootstrap::Hello;
using bootstrap::JobKey;
using bootstrap::JobLiveness;
using bootstrap::PeerRole;
using bootstrap::StoreAddress;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}
#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_TRUE(contains(haystack, needle)) << "'" << (haystack) << "' lacks '" << (needle) << "'"

Hello pe_hello(std::int32_t rank, std::int32_t size, std::int32_t pid = 0,
               const std::string& host = "node7") {
  return Hello{PeerRole::kPe, rank, size, pid != 0 ? pid : 1000 + rank, host, {}};
}

// --- JobLiveness, the store's judgement without sockets ---

TEST(JobLivenessTest, AbortModeEndsTheJobNamingThePe) {
  JobLiveness job(3);
  ASSERT_EQ(job.admit(pe_hello(1, 3, 4242), 7), "");
  const JobLiveness::Closing c = job.closed(pe_hello(1, 3, 4242), 7, false, "");
  ASSERT_TRUE(c.abort.has_value());
  EXPECT_CONTAINS(*c.abort, "PE 1 (pid 4242 on node7) disconnected without finalizing");
  EXPECT_FALSE(c.lost.has_value());
  EXPECT_EQ(job.lost_list(), "");
}

// shmem_init after shmem_finalize: the process's goodbye was answered on its old connection, whose
// close the store may read after the new hello. The same process, having said goodbye, takes its
// rank again; anyone else (or the same process without a goodbye) is still a second claimant.
TEST(JobLivenessTest, AProcessThatSaidGoodbyeMayClaimItsRankAgain) {
  JobLiveness job(2);
  ASSERT_EQ(job.admit(pe_hello(0, 2, 500), 1), "");
  ASSERT_EQ(job.admit(pe_hello(1, 2, 501), 2), "");
  EXPECT_CONTAINS(job.admit(pe_hello(1, 2, 501), 3), "two processes claim PE rank 1");
  EXPECT_CONTAINS(job.admit(pe_hello(1, 2, 777), 3), "two processes claim PE rank 1");
  job.depart(1);
  EXPECT_CONTAINS(job.admit(pe_hello(1, 2, 777), 3), "two processes claim PE rank 1");
  EXPECT_CONTAINS(job.admit(pe_hello(1, 2, 501, "node8"), 3), "two processes claim PE rank 1");
  EXPECT_EQ(job.admit(pe_hello(1, 2, 501), 3), "");
  // The old connection's close, read late, neither removes the new one nor aborts the job.
  EXPECT_FALSE(job.closed(pe_hello(1, 2, 501), 2, true, "").abort.has_value());
  EXPECT_CONTAINS(job.admit(pe_hello(1, 2, 502), 4), "two processes claim PE rank 1");
}

TEST(JobLivenessTest, ContinueModeLosesThePeAndGoesOn) {
  JobLiveness job(3, true);
  for (int r = 0; r < 3; ++r) ASSERT_EQ(job.admit(pe_hello(r, 3), 10 + r), "");
  const JobLiveness::Closing c = job.closed(pe_hello(2, 3, 4242), 12, false, "");
  EXPECT_FALSE(c.abort.has_value());
  ASSERT_TRUE(c.lost.has_value());
  EXPECT_CONTAINS(*c.lost, "PE 2 (pid 4242 on node7) disconnected without finalizing");
  EXPECT_FALSE(c.finalized);
  const JobLiveness::Closing cut = job.closed(pe_hello(0, 3), 10, false, "was cut off: why");
  ASSERT_TRUE(cut.lost.has_value());
  EXPECT_CONTAINS(*cut.lost, "PE 0 (pid 1000 on node7) was cut off: why");
  EXPECT_EQ(job.lost_list(), "2,0");  // in the order they were lost
  EXPECT_EQ(job.lost_count(), 2u);
}

TEST(JobLivenessTest, ContinueModeCountsLostRanksAsGoneForTheGoodbyes) {
  JobLiveness job(3, true);
  for (int r = 0; r < 3; ++r) ASSERT_EQ(job.admit(pe_hello(r, 3), 10 + r), "");
  EXPECT_FALSE(job.depart(0));
  EXPECT_FALSE(job.closed(pe_hello(1, 3), 11, false, "").finalized);
  EXPECT_TRUE(job.depart(2));  // the last survivor's goodbye need not wait for PE 1
  // And the other way round: the loss of the last PE still connected ends the job's goodbyes.
  JobLiveness other(2, true);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(other.admit(pe_hello(r, 2), 20 + r), "");
  EXPECT_FALSE(other.depart(0));
  EXPECT_TRUE(other.closed(pe_hello(1, 2), 21, false, "").finalized);
}

TEST(JobLivenessTest, GoodbyeThenCloseIsNoLoss) {
  JobLiveness job(2, true);
  ASSERT_EQ(job.admit(pe_hello(0, 2), 1), "");
  job.depart(0);
  const JobLiveness::Closing c = job.closed(pe_hello(0, 2), 1, true, "");
  EXPECT_FALSE(c.abort || c.lost);
  EXPECT_EQ(job.lost_list(), "");
}

TEST(JobLivenessTest, ContinueModeStillRefusesWhatBreaksTheJob) {
  JobLiveness job(2, true);
  ASSERT_EQ(job.admit(pe_hello(0, 2, 1), 1), "");
  EXPECT_CONTAINS(job.admit(pe_hello(0, 2, 2), 2), "two processes claim PE rank 0");
  EXPECT_CONTAINS(job.admit(pe_hello(1, 3), 3), "job size mismatch");
  EXPECT_CONTAINS(job.admit(pe_hello(5, 2), 4), "outside the job");
}

TEST(LostKeys, EventKeysAndTheServersOwnKeys) {
  EXPECT_EQ(bootstrap::lost_event_key(1), "shmoe/lost/1");
  EXPECT_TRUE(bootstrap::is_server_only_key("shmoe/lost"));
  EXPECT_TRUE(bootstrap::is_server_only_key("shmoe/lost/3"));
  EXPECT_FALSE(bootstrap::is_server_only_key("shmoe/lostx"));
  EXPECT_FALSE(bootstrap::is_server_only_key("shmoe/abort"));
}

// --- the store, over sockets ---

class ContinueStore : public ::testing::Test {
 protected:
  void SetUp() override { start(settings::PeLoss::kContinue); }
  void start(settings::PeLoss mode) {
    ConfigStoreServer::Options o;
    o.job_key = key_;
    o.pe_loss = mode;
    server_ = std::make_unique<ConfigStoreServer>(o);
    server_->start();
  }
  std::unique_ptr<ConfigStoreClient> client(Hello h) {
    h.job_key = key_;
    return std::make_unique<ConfigStoreClient>(StoreAddress{"127.0.0.1", server_->port()}, h,
                                               2000ms);
  }
  std::unique_ptr<ConfigStoreClient> tool() {
    return client(Hello{PeerRole::kTool, -1, 0, static_cast<std::int32_t>(::getpid()), "h", {}});
  }
  // The events pushed to `c` within 5 s, until `n` came.
  static std::vector<bootstrap::StoreEvent> collect(ConfigStoreClient& c, std::size_t n) {
    std::vector<bootstrap::StoreEvent> all;
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (all.size() < n && std::chrono::steady_clock::now() < deadline) {
      for (auto& e : c.wait_for_events(-1, 200ms).events) all.push_back(std::move(e));
    }
    return all;
  }

  JobKey key_ = JobKey::parse("unit-test-job-key-0123456789abcdef", "test key");
  std::unique_ptr<ConfigStoreServer> server_;
};

TEST_F(ContinueStore, PeClosingWithoutByeIsLostAndTheJobGoesOn) {
  auto watcher = tool();
  auto p0 = client(pe_hello(0, 3));
  auto p1 = client(pe_hello(1, 3, 4242));
  auto p2 = client(pe_hello(2, 3));
  p0->watch(bootstrap::lost_event_key(1));
  p1.reset();  // what a killed PE looks like to the store: its socket closes
  auto first = collect(*p0, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].key, "shmoe/lost/1");
  EXPECT_EQ(first[0].value, "1");
  EXPECT_EQ(watcher->get(bootstrap::kLostKey, 0ms), "1");
  EXPECT_EQ(watcher->get(bootstrap::kAbortKey, 0ms), std::nullopt);
  // The survivors still use the store.
  p0->set("k", "v");
  EXPECT_EQ(p2->get("k", 1000ms), "v");
  // A second loss has a key of its own, which holds every loss so far.
  p0->watch(bootstrap::lost_event_key(2));
  p2.reset();
  auto second = collect(*p0, 1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].key, "shmoe/lost/2");
  EXPECT_EQ(second[0].value, "1,2");
  EXPECT_EQ(watcher->get(bootstrap::kLostKey, 0ms), "1,2");
  // Only PE 0 is left: its goodbye is the job's last.
  p0->bye();
  EXPECT_EQ(watcher->get(bootstrap::kFinalizedKey, 2000ms), "1");
  EXPECT_EQ(watcher->get(bootstrap::kAbortKey, 0ms), std::nullopt);
}

TEST_F(ContinueStore, DuplicateRankStillAborts) {
  auto p0 = client(pe_hello(0, 2, 1));
  EXPECT_THROW(client(pe_hello(0, 2, 2)), Error);
  auto abort = tool()->get(bootstrap::kAbortKey, 2000ms);
  ASSERT_TRUE(abort.has_value());
  EXPECT_CONTAINS(*abort, "two processes claim PE rank 0");
}

TEST_F(ContinueStore, AbortModeIsUnchanged) {
  server_.reset();
  start(settings::PeLoss::kAbort);
  auto watcher = tool();
  auto p0 = client(pe_hello(0, 2));
  auto p1 = client(pe_hello(1, 2, 4242));
  p1.reset();
  auto abort = watcher->get(bootstrap::kAbortKey, 3000ms);
  ASSERT_TRUE(abort.has_value());
  EXPECT_CONTAINS(*abort, "PE 1 (pid 4242 on node7) disconnected without finalizing");
  EXPECT_EQ(watcher->get(bootstrap::kLostKey, 0ms), std::nullopt);
}

// No process may make the others believe a PE was lost (nor hide a loss): every write to the
// lost keys is refused, naming the key, and leaves them as they were.
TEST_F(ContinueStore, OnlyTheStoreWritesTheLostKeys) {
  auto p0 = client(pe_hello(0, 2));
  auto t = tool();
  for (ConfigStoreClient* c : {p0.get(), t.get()}) {
    for (const std::string key : {"shmoe/lost", "shmoe/lost/1"}) {
      const auto refused = [&](const std::function<void()>& f, const char* op) {
        try {
          f();
          ADD_FAILURE() << op << " of " << key << " was accepted";
        } catch (const Error& e) {
          EXPECT_CONTAINS(std::string(e.what()), "written only by the config store");
          EXPECT_CONTAINS(std::string(e.what()), key);
        }
      };
      refused([&] { c->set(key, "0"); }, "SET");
      refused([&] { c->add(key, 1); }, "ADD");
      refused([&] { c->append(key, "0"); }, "APPEND");
      refused([&] { c->compare_and_swap(key, std::nullopt, "0"); }, "CAS");
      refused([&] { c->remove(key); }, "REMOVE");
    }
  }
  EXPECT_EQ(t->get("shmoe/lost", 0ms), std::nullopt);
  EXPECT_EQ(t->get("shmoe/lost/1", 0ms), std::nullopt);
  EXPECT_EQ(t->get(bootstrap::kAbortKey, 0ms), std::nullopt);  // the refusals end nobody
  t->set("shmoe/lostx", "a key of the user's");
  EXPECT_EQ(t->get("shmoe/lostx", 0ms), "a key of the user's");
}

// --- the PE's set of lost PEs ---

class LostSet : public ::testing::Test {
 protected:
  void SetUp() override { clear_lost_pes(); }
  void TearDown() override {
    clear_lost_pes();
    set_watch_lost_pes(false);
  }
};

TEST_F(LostSet, RecordsTheStoresList) {
  EXPECT_FALSE(any_pe_lost());
  EXPECT_FALSE(pe_lost(3));
  mark_pes_lost("3");
  mark_pes_lost("3,70");
  EXPECT_TRUE(any_pe_lost());
  EXPECT_TRUE(pe_lost(3));
  EXPECT_TRUE(pe_lost(70));
  EXPECT_FALSE(pe_lost(4));
  EXPECT_FALSE(pe_lost(-1));
  EXPECT_EQ(lost_pes(), (std::vector<int>{3, 70}));
  for (const char* bad : {"x", "1,,2", "-1", "2,"}) {
    EXPECT_THROW(mark_pes_lost(bad), Error) << bad;
  }
  clear_lost_pes();
  EXPECT_FALSE(pe_lost(3));
  EXPECT_TRUE(lost_pes().empty());
}

WaitState waiting_for(int pe) {
  return {"barrier", fmt::format("barrier #5 round 0 (waiting for PE {})", pe), pe, 5, 0, 5};
}

// The hang timeout is an hour: only the lost check can end these waits in time.
void wait_forever_for(int pe) {
  wait_policy().hang_timeout = std::chrono::hours(1);
  wait_until([] { return false; }, [&] { return waiting_for(pe); });
}

// Loses `list` once a wait of this process has left its spin phase: the loss comes while it
// waits, as a store's event would.
void lose_once_waiting(const char* list) {
  std::thread([list] {
    while (current_waits().empty()) std::this_thread::yield();
    mark_pes_lost(list);
  }).detach();
}

using LostSetDeathTest = LostSet;

TEST_F(LostSetDeathTest, WaitForALostPeEndsNamingIt) {
  EXPECT_EXIT(
      {
        lose_once_waiting("2");
        wait_forever_for(2);
      },
      ::testing::ExitedWithCode(1),
      "barrier #5 round 0 \\(waiting for PE 2\\): PE 2 was lost \\(SHMOE_PE_LOSS=continue\\); "
      "this call cannot complete without it");
}

TEST_F(LostSetDeathTest, WakeWordWaitForALostPeEndsNamingIt) {
  EXPECT_EXIT(
      {
        set_watch_lost_pes(true);
        wait_policy().hang_timeout = std::chrono::hours(1);
        lose_once_waiting("1");
        std::uint32_t word = 0;
        WakeWord(&word).wait_for(2, 0, [] { return waiting_for(1); });
      },
      ::testing::ExitedWithCode(1), "PE 1 was lost \\(SHMOE_PE_LOSS=continue\\)");
}

// A wait for a PE that is alive goes on while another PE is lost; so does a wait whose code
// handles lost PEs itself (shrink-mode MoE calls), until its own condition ends it.
TEST_F(LostSet, OnlyWaitsForTheLostPeEnd) {
  mark_pes_lost("2");
  const auto until = std::chrono::steady_clock::now() + 300ms;  // three lost checks
  auto later = [&] { return std::chrono::steady_clock::now() >= until; };
  wait_until(later, [] { return waiting_for(1); });
  const auto until2 = std::chrono::steady_clock::now() + 300ms;
  {
    LostPesHandledHere scope;
    wait_until([&] { return std::chrono::steady_clock::now() >= until2; },
               [] { return waiting_for(2); });
  }
  EXPECT_FALSE(lost_pes_handled_here());
}

TEST(PeLossSetting, DefaultsToAbortAndRefusesOtherValuesNamingThem) {
  settings::set("SHMOE_PE_LOSS", std::nullopt);
  EXPECT_EQ(settings::pe_loss(), settings::PeLoss::kAbort);
  settings::set("SHMOE_PE_LOSS", "continue");
  EXPECT_EQ(settings::pe_loss(), settings::PeLoss::kContinue);
  settings::set("SHMOE_PE_LOSS", "ignore");
  try {
    settings::pe_loss();
    ADD_FAILURE() << "SHMOE_PE_LOSS=ignore was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "SHMOE_PE_LOSS=ignore is not one of the accepted values: abort, continue");
  }
  settings::set("SHMOE_PE_LOSS", std::nullopt);
}

}  // namespace
}  // namespace shmoe
