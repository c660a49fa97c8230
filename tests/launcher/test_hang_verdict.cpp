// The verdict on hand-made hang reports: the PE the others wait on is named, with who waits for
// it where, and a PE that waits in the same operation passes the blame on.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hang_verdict.hpp"

namespace {

using nlohmann::json;
using shmoe::tools::hang_verdict;

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
  EXPECT_EQ(hang_verdict(r),
            "verdict: PE 1 is the one the others wait on (PE 0 waits for it in barrier #3, PE 2 "
            "waits for it in barrier #3); PE 1 itself is not waiting inside shmoe: it is busy in "
            "the program, or never made the call");
}

TEST(HangVerdict, FollowsTheChainThroughAPeWaitingInTheSameOperation) {
  // Dissemination barrier at 4 PEs, PE 1 missing: PE 0 waits for PE 2, which waits for PE 1.
  std::vector<json> r{report(0, {wait("barrier", 2, 1)}), report(1, {}),
                      report(2, {wait("barrier", 1, 1)}), report(3, {wait("barrier", 1, 1)})};
  const std::string v = hang_verdict(r);
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
  const std::string v = hang_verdict(r);
  EXPECT_EQ(v.rfind("verdict: PE 1 is the one the others wait on (PE 0 waits for it in combine "
                    "entry #3, PE 2 waits for it in combine entry #3); PE 1 itself is waiting in "
                    "barrier detail (for PE 0)",
                    0),
            0u)
      << v;
}

TEST(HangVerdict, ACycleInOneOperationBlamesNobody) {
  std::vector<json> r{report(0, {wait("barrier", 1, 2)}), report(1, {wait("barrier", 0, 2)})};
  EXPECT_EQ(hang_verdict(r),
            "verdict: no single PE: the PEs wait on each other (PE 0 waits for PE 1 in barrier #2, "
            "PE 1 waits for PE 0 in barrier #2)");
}

TEST(HangVerdict, TwoPesOutOfStepWithEachOtherAreBothListed) {
  std::vector<json> r{report(0, {wait("combine entry", 1, 3)}), report(1, {wait("barrier", 0, 5)})};
  EXPECT_EQ(hang_verdict(r),
            "verdict: no single PE: the PEs wait on each other (PE 0 waits for PE 1 in combine "
            "entry #3, PE 1 waits for PE 0 in barrier #5)");
}

TEST(HangVerdict, APeWithoutReportIsNamed) {
  std::vector<json> r{report(0, {wait("dispatch header", 1, 4)}), nullptr};
  EXPECT_EQ(hang_verdict(r),
            "verdict: PE 1 is the one the others wait on (PE 0 waits for it in dispatch header "
            "#4); PE 1 sent no report (it may have died, or be stuck with signals blocked) (no "
            "report from PE 1)");
}

TEST(HangVerdict, WaitsThatNameNoPeAreListed) {
  std::vector<json> r{report(0, {wait("shmem_long_wait_until", -1, 0)})};
  EXPECT_EQ(hang_verdict(r),
            "verdict: no PE is named by the waits: PE 0 waits in shmem_long_wait_until for no "
            "single PE");
}

}  // namespace
