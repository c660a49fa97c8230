// The slow-PE verdict on wait matrices made here: a PE that every other PE waits for by a
// margin is named, whichever PE it is and whatever the PE count; waits spread evenly (noise of
// the same size on every PE, as time-sharing makes them) name nobody.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "slow_pe.hpp"

namespace shmoe::tools {
namespace {

// P x P waits: noise in [0, noise_us) everywhere but the diagonal, plus delay_us in column slow.
std::vector<double> waits(int P, double noise_us, int slow, double delay_us, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> noise(0, noise_us);
  std::vector<double> w(static_cast<std::size_t>(P * P), 0);
  for (int r = 0; r < P; ++r) {
    for (int s = 0; s < P; ++s) {
      if (r == s) continue;
      w[static_cast<std::size_t>(r * P + s)] = noise(rng) + (s == slow ? delay_us : 0);
    }
  }
  return w;
}

TEST(SlowPe, NamesThePeEveryoneWaitsFor) {
  const auto seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  for (int P : {2, 3, 4, 8}) {
    for (int slow = 0; slow < P; ++slow) {
      const auto w = waits(P, 40, slow, 300, rng);
      const SlowPeVerdict v = judge_slow_pe(w, P);
      EXPECT_EQ(v.pe, slow) << "P=" << P << " seed=" << seed;
      EXPECT_GE(v.blame_us, 300);
      EXPECT_NE(wait_matrix_text(w, P, v).find("slow PE: " + std::to_string(slow) + " "),
                std::string::npos);
    }
  }
}

TEST(SlowPe, EvenNoiseNamesNobody) {
  const auto seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  for (int P : {2, 4, 8}) {
    for (int round = 0; round < 50; ++round) {
      // Waits of 100-130 us on every PE: a spread within the noise.
      auto w = waits(P, 30, -1, 0, rng);
      for (int r = 0; r < P; ++r)
        for (int s = 0; s < P; ++s)
          if (r != s) w[static_cast<std::size_t>(r * P + s)] += 100;
      const SlowPeVerdict v = judge_slow_pe(w, P);
      EXPECT_EQ(v.pe, -1) << "P=" << P << " seed=" << seed;
      EXPECT_NE(wait_matrix_text(w, P, v).find("slow PE: none"), std::string::npos);
    }
  }
}

TEST(SlowPe, TwoEquallySlowPesAreNotOneSlowPe) {
  // The verdict names one PE; two that hold everyone up alike are not that.
  std::vector<double> w(16, 10);
  for (int r = 0; r < 4; ++r) {
    w[static_cast<std::size_t>(r * 4 + r)] = 0;
    if (r != 1) w[static_cast<std::size_t>(r * 4 + 1)] = 500;
    if (r != 2) w[static_cast<std::size_t>(r * 4 + 2)] = 480;
  }
  EXPECT_EQ(judge_slow_pe(w, 4).pe, -1);
}

TEST(SlowPe, OnePeHasNobodyToWaitFor) {
  EXPECT_EQ(judge_slow_pe({0.0}, 1).pe, -1);
}

}  // namespace
}  // namespace shmoe::tools
