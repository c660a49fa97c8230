// The verdict on hand-made hang reports: the PE the others wait on is named, with who waits for
// it where, and a PE that waits in the same operation passes the blame on; waits that name no
// single PE blame the lone PE that is not waiting; a PE that has finalized is said to have.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hang_verdict.hpp"

namespace {

using nlohmann::json;

// The line alone, for the cases whose culprits are checked elsewhere.
std::string verdict_line(const std::vector<json>& reports,
                         const std::vector<bool>& finalized = {}) {
  return shmoe::tools::hang_verdict(reports, finalized).line;
}
std::vector<int> culprits(const std::vector<json>& reports,
                          const std::vector<bool>& finalized = {}) {
  return shmoe::tools::hang_verdict(reports, finalized).culprits;
}

json wait(const std::string& op, int peer, std::uint64_t generation) {
  return {{"op", op},          {"detail", op + " detail"}, {"peer", peer},    {"expected", 1},
          {"seen", 0},         {"generation", generation}, {"waited_s", 2.0}, {"thread", 7},
          {"timed_out", false}};
}

json report(int pe, std::vector<json> waits) {
  return {{"pe", pe}, {"pid", 100 + pe}, {"reason", "timeout"}, {"waits", waits}};
}

TEST(HangVerdict, NamesThePeThatIsNotWaiting) {
  std::vector<json> r{report(0, {wait("barrier", 1, 3)}), report(1, {}),
                      report(2, {wait("barrier", 1, 3)})};
  EXPECT_EQ(verdict_line(r),
            "verdict: PE 1 is the one the others wait on (PE 0 waits for it in barrier #3, PE 2 "
            "waits for it in barrier #3); PE 1 itself is not waiting inside shmoe: it is busy in "
            "the program, or never made the call");
}

TEST(HangVerdict, FollowsTheChainThroughAPeWaitingInTheSameOperation) {
  // Dissemination barrier at 4 PEs, PE 1 missing: PE 0 waits for PE 2, which waits for PE 1.
  std::vector<json> r{report(0, {wait("barrier", 2, 1)}), report(1, {}),
                      report(2, {wait("barrier", 1, 1)}), report(3, {wait("barrier", 1, 1)})};
  const std::string v = verdict_line(r);
  EXPECT_EQ(v.find("PE 2 is the one"), std::string::npos) << v;
  EXPECT_EQ(v.rfind("verdict: PE 1 is the one the others wait on (PE 2 waits for it in barrier "
                    "#1, PE 3 waits for it in barrier #1)",
                    0),
            0u)
      << v;
}

TEST(HangVerdict, APeWaitingInAnotherOperationIsToBlame) {
  std::vector<json> r{report(0, {wait("combine entry", 1, 3)}), report(1, {wait("barrier", 0, 5)}),
                      report(2, {wait("combine entry", 1, 3)})};
  const std::string v = verdict_line(r);
  EXPECT_EQ(v.rfind("verdict: PE 1 is the one the others wait on (PE 0 waits for it in combine "
                    "entry #3, PE 2 waits for it in combine entry #3); PE 1 itself is waiting in "
                    "barrier detail (for PE 0)",
                    0),
            0u)
      << v;
}

TEST(HangVerdict, ACycleInOneOperationBlamesNobody) {
  std::vector<json> r{report(0, {wait("barrier", 1, 2)}), report(1, {wait("barrier", 0, 2)})};
  EXPECT_EQ(verdict_line(r),
            "verdict: no single PE: the PEs wait on each other (PE 0 waits for PE 1 in barrier #2, "
            "PE 1 waits for PE 0 in barrier #2)");
}

TEST(HangVerdict, TwoPesOutOfStepWithEachOtherAreBothListed) {
  std::vector<json> r{report(0, {wait("combine entry", 1, 3)}), report(1, {wait("barrier", 0, 5)})};
  EXPECT_EQ(verdict_line(r),
            "verdict: no single PE: the PEs wait on each other (PE 0 waits for PE 1 in combine "
            "entry #3, PE 1 waits for PE 0 in barrier #5)");
}

TEST(HangVerdict, APeWithoutReportIsNamed) {
  std::vector<json> r{report(0, {wait("dispatch header", 1, 4)}), nullptr};
  EXPECT_EQ(verdict_line(r),
            "verdict: PE 1 is the one the others wait on (PE 0 waits for it in dispatch header "
            "#4); PE 1 sent no report (it may have died, or be stuck with signals blocked) (no "
            "report from PE 1)");
}

TEST(HangVerdict, WaitsThatNameNoPeAreListed) {
  std::vector<json> r{report(0, {wait("shmem_long_wait_until", -1, 0)})};
  EXPECT_EQ(verdict_line(r),
            "verdict: no PE is named by the waits: PE 0 waits in shmem_long_wait_until for no "
            "single PE");
}

}  // namespace

namespace {

TEST(HangVerdict, CulpritsAreThePesTheLineBlames) {
  std::vector<json> r{report(0, {wait("barrier", 1, 3)}), report(1, {}),
                      report(2, {wait("barrier", 1, 3)})};
  EXPECT_EQ(culprits(r), std::vector<int>{1});
  std::vector<json> cycle{report(0, {wait("barrier", 1, 2)}), report(1, {wait("barrier", 0, 2)})};
  EXPECT_TRUE(culprits(cycle).empty());
}

// A sum_reduce that PE 1 never joins: the others wait for no single PE.
TEST(HangVerdict, TheLonePeNotWaitingIsBlamedForWaitsWithoutAPeer) {
  std::vector<json> r{report(0, {wait("reduce", -1, 2)}), report(1, {}),
                      report(2, {wait("reduce", -1, 2)})};
  EXPECT_EQ(verdict_line(r),
            "verdict: PE 1 is the one the others wait on (it is the only PE not waiting inside "
            "shmoe: PE 0 waits in reduce #2 for no single PE, PE 2 waits in reduce #2 for no "
            "single PE); PE 1 itself is not waiting inside shmoe: it is busy in the program, or "
            "never made the call");
  EXPECT_EQ(culprits(r), std::vector<int>{1});
}

// A flag that only PE 1 would set: the others wait in shmem_wait_until, which names no PE.
TEST(HangVerdict, TheLonePeNotWaitingIsBlamedForAFlagNobodySets) {
  std::vector<json> r{report(0, {wait("shmem_long_wait_until", -1, 0)}), report(1, {}),
                      report(2, {wait("shmem_long_wait_until", -1, 0)})};
  EXPECT_EQ(verdict_line(r),
            "verdict: PE 1 is the one the others wait on (it is the only PE not waiting inside "
            "shmoe: PE 0 waits in shmem_long_wait_until for no single PE, PE 2 waits in "
            "shmem_long_wait_until for no single PE); PE 1 itself is not waiting inside shmoe: it "
            "is busy in the program, or never made the call");
}

TEST(HangVerdict, TwoPesNotWaitingAreNotGuessedBetween) {
  std::vector<json> r{report(0, {wait("reduce", -1, 2)}), report(1, {}), report(2, {})};
  EXPECT_EQ(verdict_line(r),
            "verdict: no PE is named by the waits: PE 0 waits in reduce #2 for no "
            "single PE");
  EXPECT_TRUE(culprits(r).empty());
}

// The PE not waiting is only blamed for waits it could end: a cycle between the others is not
// its doing.
TEST(HangVerdict, ACycleBesideAnIdlePeBlamesNobody) {
  std::vector<json> r{report(0, {wait("barrier", 1, 2)}), report(1, {wait("barrier", 0, 2)}),
                      report(2, {})};
  EXPECT_TRUE(culprits(r).empty()) << verdict_line(r);
}

TEST(HangVerdict, ASilentPeIsTheLoneOneNotWaiting) {
  std::vector<json> r{report(0, {wait("reduce", -1, 1)}), nullptr};
  EXPECT_EQ(verdict_line(r),
            "verdict: PE 1 is the one the others wait on (it is the only PE not waiting inside "
            "shmoe: PE 0 waits in reduce #1 for no single PE); PE 1 sent no report (it may have "
            "died, or be stuck with signals blocked) (no report from PE 1)");
}

// PE 1 skipped a barrier, then finalized: its finalize's barrier matched the others' barrier,
// and they wait for it in the next one.
TEST(HangVerdict, APeThatFinalizedIsSaidToHave) {
  std::vector<json> r{report(0, {wait("barrier", 1, 5)}), nullptr,
                      report(2, {wait("barrier", 1, 5)})};
  EXPECT_EQ(verdict_line(r, {false, true, false}),
            "verdict: PE 1 is the one the others wait on (PE 0 waits for it in barrier #5, PE 2 "
            "waits for it in barrier #5); PE 1 has already called shmem_finalize (it skipped the "
            "barrier the others wait in)");
  EXPECT_EQ(culprits(r, {false, true, false}), std::vector<int>{1});
}

// A report written before the PE finalized no longer says what it does.
TEST(HangVerdict, AFinalizedPesOldReportIsIgnored) {
  std::vector<json> r{report(0, {wait("reduce", -1, 3)}), report(1, {wait("reduce", -1, 2)})};
  EXPECT_EQ(verdict_line(r, {false, true}),
            "verdict: PE 1 is the one the others wait on (it is the only PE not waiting inside "
            "shmoe: PE 0 waits in reduce #3 for no single PE); PE 1 has already called "
            "shmem_finalize (it skipped the reduce the others wait in)");
}

TEST(HangVerdict, FinalizedPesThatAreNotBlamedAreMentioned) {
  std::vector<json> r{report(0, {wait("barrier", 1, 2)}), report(1, {}), nullptr};
  EXPECT_EQ(verdict_line(r, {false, false, true}),
            "verdict: PE 1 is the one the others wait on (PE 0 waits for it in barrier #2); PE 1 "
            "itself is not waiting inside shmoe: it is busy in the program, or never made the "
            "call (PE 2 has called shmem_finalize)");
}

}  // namespace
