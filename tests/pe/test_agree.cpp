// shmoe_agree and shmoe_heap_allocation (shmoe/runtime.h) through their C++ wrapper: a refusal on
// any member, or values that differ, give the same verdict on every member, with a message that
// names the refusing PE or the values; the team's later collectives still work.
#include <gtest/gtest.h>

#include <string>

#include "pe_test.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::test {
namespace {

// The verdict of one agreement on this PE: "" when it passed, else the message.
std::string verdict(shmem_team_t team, const std::string& refusal,
                    std::initializer_list<AgreedValue> values = {}) {
  try {
    agree(team, "test_call", refusal, values);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(Agree, NobodyRefusesAndValuesMatch) {
  const std::uint64_t seed = shared_seed();
  EXPECT_EQ(verdict(SHMEM_TEAM_WORLD, ""), "");
  const auto v = static_cast<std::int64_t>(mix(seed));  // any value, the same on every PE
  EXPECT_EQ(verdict(SHMEM_TEAM_WORLD, "", {{"a", v}, {"b", -v}, {"c", 0}, {"d", INT64_MIN}}), "");
}

TEST(Agree, ARefusalReachesEveryPe) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  const int culprit = static_cast<int>(mix(shared_seed()) % static_cast<std::uint64_t>(n));
  const std::string reason = "x=" + std::to_string(culprit) + " is out of range";
  const std::string got =
      verdict(SHMEM_TEAM_WORLD, me == culprit ? "test_call: " + reason : "", {{"bytes", 64}});
  if (me == culprit) {
    EXPECT_EQ(got, "test_call: " + reason);
  } else {
    EXPECT_EQ(got, "test_call: PE " + std::to_string(culprit) + " refused the call: " + reason);
  }
  // Two refusing PEs: every other PE names the lowest.
  if (n >= 3) {
    const std::string two = verdict(SHMEM_TEAM_WORLD, me >= 1 ? "PE " + std::to_string(me) : "");
    if (me == 0) {
      EXPECT_EQ(two, "test_call: PE 1 refused the call: PE 1");
    } else {
      EXPECT_EQ(two, "test_call: PE " + std::to_string(me));
    }
  }
  EXPECT_EQ(verdict(SHMEM_TEAM_WORLD, ""), "");  // the next agreement is clean again
}

TEST(Agree, DifferentValuesAreNamed) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  if (n < 2) GTEST_SKIP() << "needs two PEs";
  const std::string got = verdict(SHMEM_TEAM_WORLD, "", {{"same", 7}, {"size", 100 + me}});
  EXPECT_EQ(got, "test_call: the PEs disagree on size (values from 100 to " +
                     std::to_string(99 + n) + "; this PE passed " + std::to_string(100 + me) +
                     "): every PE must pass the same");
}

TEST(Agree, OnASplitTeamOnly) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  if (n < 2) GTEST_SKIP() << "needs two PEs";
  shmem_team_t evens = SHMEM_TEAM_INVALID;
  ASSERT_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, nullptr, 0, &evens), 0);
  if (me % 2 == 0) {
    ASSERT_NE(evens, SHMEM_TEAM_INVALID);
    // The team's last member refuses; its number in the team is what the others name.
    const int last = shmem_team_n_pes(evens) - 1;
    const std::string got =
        verdict(evens, shmem_team_my_pe(evens) == last ? "mine" : "", {{"k", 1}});
    if (shmem_team_my_pe(evens) == last) {
      EXPECT_EQ(got, "test_call: mine");
    } else {
      EXPECT_EQ(got, "test_call: PE " + std::to_string(last) + " refused the call: mine");
    }
    shmem_team_destroy(evens);
  }
  shmem_barrier_all();
}

TEST(Agree, BadArgumentsAreRefusedLocally) {
  constexpr int kTooMany = SHMOE_AGREE_MAX_VALUES + 1;
  const std::int64_t v[kTooMany] = {};
  const char* names[kTooMany] = {};
  for (auto& n : names) n = "a";
  EXPECT_EQ(shmoe_agree(SHMEM_TEAM_WORLD, "c", nullptr, v, names, kTooMany), -1);
  EXPECT_NE(std::string(shmoe_last_error())
                .find("n_values=" + std::to_string(kTooMany) + " is out of range (0.." +
                      std::to_string(SHMOE_AGREE_MAX_VALUES)),
            std::string::npos);
  const char* missing[1] = {nullptr};
  EXPECT_EQ(shmoe_agree(SHMEM_TEAM_WORLD, "c", nullptr, v, missing, 1), -1);
  EXPECT_NE(std::string(shmoe_last_error()).find("value_names[0] is NULL"), std::string::npos);
}

TEST(HeapAllocation, LiveAllocationsOnly) {
  auto* a = static_cast<char*>(shmem_malloc(100));
  ASSERT_NE(a, nullptr);
  const auto whole = heap_allocation(a, 100);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->start, a);
  EXPECT_GE(whole->size, 100u);
  const auto inner = heap_allocation(a + 10, 20);
  ASSERT_TRUE(inner.has_value());
  EXPECT_EQ(inner->start, a);
  EXPECT_FALSE(heap_allocation(a + 10, whole->size)) << "runs past the allocation";
  int on_stack = 0;
  EXPECT_FALSE(heap_allocation(&on_stack, sizeof on_stack));
  EXPECT_FALSE(heap_allocation(nullptr, 1));
  shmem_free(a);
  EXPECT_FALSE(heap_allocation(a, 1)) << "freed";
}

}  // namespace
}  // namespace shmoe::test
