// The wait registry and the hang report built from it: a wait that left its spin phase is
// listed with the fields its describe() gives, and unlisted when it ends; the report's JSON,
// its line and its file name.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/backoff.hpp"
#include "common/error.hpp"
#include "common/hang_report.hpp"
#include "common/settings.hpp"
#include "common/wait_registry.hpp"

namespace shmoe {
namespace {

// A thread waiting in wait_until for `release`, described as op "test op" waiting for PE 3.
class WaitingThread {
 public:
  WaitingThread()
      : thread_([this] {
          wait_until([&] { return release_.load(std::memory_order_acquire); },
                     [&] { return WaitState{"test op", "flag at 5, want 7", 3, 7, 5, 2}; });
        }) {}
  ~WaitingThread() {
    release_.store(true, std::memory_order_release);
    thread_.join();
  }

 private:
  std::atomic<bool> release_{false};
  std::thread thread_;
};

std::vector<ThreadWait> waits_after_listing() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::vector<ThreadWait> w;
  while ((w = current_waits()).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return w;
}

TEST(WaitRegistry, ListsASlowWaitWithItsFieldsAndUnlistsItWhenItEnds) {
  {
    WaitingThread t;
    const auto waits = waits_after_listing();
    ASSERT_EQ(waits.size(), 1u);
    EXPECT_EQ(waits[0].state.op, "test op");
    EXPECT_EQ(waits[0].state.detail, "flag at 5, want 7");
    EXPECT_EQ(waits[0].state.peer, 3);
    EXPECT_EQ(waits[0].state.expected, 7u);
    EXPECT_EQ(waits[0].state.seen, 5u);
    EXPECT_EQ(waits[0].state.generation, 2u);
    EXPECT_GT(waits[0].tid, 0);
    EXPECT_GE(waits[0].waited_s, 0.0);
  }
  EXPECT_TRUE(current_waits().empty());
}

TEST(WaitRegistry, AWaitThatIsReadyAtOnceIsNeverListed) {
  bool described = false;
  wait_until([] { return true; },
             [&] {
               described = true;
               return WaitState{};
             });
  EXPECT_FALSE(described);
  EXPECT_TRUE(current_waits().empty());
}

TEST(HangReport, JsonAndLineCarryTheWaitsFields) {
  WaitingThread t;
  ASSERT_EQ(waits_after_listing().size(), 1u);
  const nlohmann::json r = build_hang_report("signal");
  EXPECT_EQ(r.at("reason"), "signal");
  EXPECT_EQ(r.at("pid"), static_cast<int>(::getpid()));
  ASSERT_EQ(r.at("waits").size(), 1u);
  const auto& w = r.at("waits")[0];
  EXPECT_EQ(w.at("op"), "test op");
  EXPECT_EQ(w.at("peer"), 3);
  EXPECT_EQ(w.at("expected"), 7);
  EXPECT_EQ(w.at("seen"), 5);
  EXPECT_EQ(w.at("generation"), 2);
  EXPECT_EQ(w.at("timed_out"), false);
  const std::string line = hang_report_line(r);
  EXPECT_NE(line.find("waits in test op for PE 3: flag at 5, want 7 (seen 5, expected 7)"),
            std::string::npos)
      << line;
}

TEST(HangReport, AnIdleProcessSaysSo) {
  const nlohmann::json r = build_hang_report("signal");
  EXPECT_TRUE(r.at("waits").empty());
  EXPECT_NE(hang_report_line(r).find("no thread is waiting inside shmoe"), std::string::npos);
}

TEST(HangReportPath, ReplacesPercentPWithThePe) {
  settings::set("SHMOE_HANG_REPORT", "/tmp/hang-%p.json");
  EXPECT_EQ(hang_report_path(2, 4), "/tmp/hang-2.json");
  settings::set("SHMOE_HANG_REPORT", std::nullopt);
  EXPECT_EQ(hang_report_path(2, 4), "");
}

TEST(HangReportPath, APatternWithoutPercentPIsRefusedForSeveralPes) {
  settings::set("SHMOE_HANG_REPORT", "/tmp/hang.json");
  EXPECT_EQ(hang_report_path(0, 1), "/tmp/hang.json");
  try {
    hang_report_path(0, 4);
    ADD_FAILURE() << "accepted a pattern without %p for 4 PEs";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SHMOE_HANG_REPORT=/tmp/hang.json has no %p"),
              std::string::npos)
        << e.what();
  }
  settings::set("SHMOE_HANG_REPORT", std::nullopt);
}

TEST(HangReport, IsWrittenToTheFileAsOneJsonObject) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("hang-{}", ::getpid());
  std::filesystem::create_directories(dir);
  settings::set("SHMOE_HANG_REPORT", (dir / "r%p.json").c_str());
  WaitingThread t;
  ASSERT_EQ(waits_after_listing().size(), 1u);
  write_hang_report(build_hang_report("signal"));
  settings::set("SHMOE_HANG_REPORT", std::nullopt);
  // log::rank() is -1 in a process without shmem_init.
  std::ifstream in(dir / "r-1.json");
  ASSERT_TRUE(in);
  const nlohmann::json r = nlohmann::json::parse(in);
  EXPECT_EQ(r.at("waits")[0].at("op"), "test op");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace shmoe
