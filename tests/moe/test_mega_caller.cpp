// What a program that drives MegaMoE through the public API (shmoe/moe.hpp over shmoe/moe.h)
// asks of it besides running the layer, in real PEs: the configuration check before any PE
// starts, the heap with and without the unfused chain, what the layer resolved at creation, and
// the trace of a run's stages.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <shmem.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "../pe/pe_test.hpp"
#include "shmoe/moe.hpp"

namespace shmoe {
namespace {

constexpr int kTokens = 4, kHidden = 32, kFfn = 64, kExperts = 2;

MegaMoEConfig config() {
  MegaMoEConfig c;
  c.max_tokens_per_pe = kTokens;
  c.hidden = kHidden;
  c.intermediate_hidden = kFfn;
  c.num_topk = 2;
  c.num_experts_per_pe = kExperts;
  c.format = SHMOE_FP8_E4M3;
  return c;
}

// Weights of kExperts experts, all 0.5 in MX E4M3 (the values do not matter here).
struct Weights {
  std::vector<std::uint8_t> w1, w2;
  std::vector<const std::uint8_t*> p1, p2;
  Weights() {
    const std::vector<float> a(static_cast<std::size_t>(kFfn) * kHidden, 0.5f);
    const std::vector<float> b(static_cast<std::size_t>(kHidden) * kFfn / 2, 0.5f);
    w1 = mx_quantize_rows(a.data(), kFfn, kHidden, SHMOE_FP8_E4M3);
    w2 = mx_quantize_rows(b.data(), kHidden, kFfn / 2, SHMOE_FP8_E4M3);
    for (int e = 0; e < kExperts; ++e) {
      p1.push_back(w1.data());
      p2.push_back(w2.data());
    }
  }
};

TEST(MegaCaller, ConfigCheckNamesTheFieldAsTheStructSpellsIt) {
  const int n = shmem_n_pes();
  EXPECT_EQ(MegaMoE::config_error(config(), n), "");
  MegaMoEConfig c = config();
  c.intermediate_hidden = 3;
  EXPECT_EQ(MegaMoE::config_error(c, n),
            "shmoe_mega_moe_config_check: intermediate_hidden=3 must be even and in 2..131072 "
            "(SwiGLU splits it in two halves)");
  EXPECT_EQ(MegaMoE::symmetric_bytes(c, n), 0u);
  EXPECT_EQ(MegaMoE::unfused_symmetric_bytes(c, n), 0u);
  c = config();
  c.matrix_workers = 1;
  c.vector_workers = 3;
  EXPECT_EQ(MegaMoE::config_error(c, n),
            "shmoe_mega_moe_config_check: matrix_workers=1 and vector_workers=3: give both or "
            "neither, with vector_workers = 2 x matrix_workers and matrix_workers in 1..64");
  c = config();
  c.schedule = static_cast<shmoe_mega_schedule_t>(9);
  EXPECT_EQ(MegaMoE::config_error(c, n),
            "shmoe_mega_moe_config_check: config->schedule=9 is out of range (0..3, "
            "SHMOE_MEGA_SCHEDULE_AUTO..SHMOE_MEGA_SCHEDULE_SOLO)");
  // The unfused chain adds a dispatch and a combine buffer's windows.
  EXPECT_GT(MegaMoE::unfused_symmetric_bytes(config(), n), MegaMoE::symmetric_bytes(config(), n));
}

TEST(MegaCaller, InfoSaysWhatCreationResolvedAndTheTraceHasEachWorkersStages) {
  Weights w;
  MegaMoEConfig c = config();
  c.weights = SHMOE_MEGA_WEIGHTS_FP8;
  c.matrix_workers = 1;
  c.vector_workers = 2;
  // Two schedules, so that the one "auto" would resolve to on this machine cannot pass for both.
  c.schedule = SHMOE_MEGA_SCHEDULE_OVERLAPPED;
  EXPECT_EQ(MegaMoE(c, w.p1, w.p2).info().schedule, SHMOE_MEGA_SCHEDULE_OVERLAPPED);
  c.schedule = SHMOE_MEGA_SCHEDULE_INLINE;
  MegaMoE op(c, w.p1, w.p2);
  const MegaMoEInfo info = op.info();
  EXPECT_EQ(info.schedule, SHMOE_MEGA_SCHEDULE_INLINE);
  EXPECT_EQ(info.weights, SHMOE_MEGA_WEIGHTS_FP8);
  EXPECT_EQ(info.matrix_workers, 1);
  EXPECT_EQ(info.vector_workers, 2);
  // FP8 weights are kept as given: at least the codes and scales of both matrices of every
  // expert.
  EXPECT_GE(info.weight_bytes, kExperts * (w.w1.size() + w.w2.size()));
  EXPECT_GT(std::strlen(info.gemm_engine), 0u);

  const int me = shmem_my_pe();
  std::vector<std::uint16_t> x(static_cast<std::size_t>(kTokens) * kHidden, 0x3f80);  // 1.0
  std::vector<std::int32_t> ids(static_cast<std::size_t>(kTokens) * 2);
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<std::int32_t>((me + i) % (shmem_n_pes() * kExperts));
  std::vector<float> weights(ids.size(), 0.5f);
  std::vector<std::uint16_t> y(x.size());
  std::vector<std::int32_t> counts(kExperts);
  const MegaMoEArgs a{x.data(), ids.data(), weights.data(), kTokens, y.data(), counts.data()};
  op.run(a);
  EXPECT_TRUE(op.last_trace().empty());  // not traced
  op.set_tracing(true);
  op.run(a);
  op.set_tracing(false);
  const std::vector<MegaStageEvent> events = op.last_trace();
  ASSERT_FALSE(events.empty());
  std::set<int> workers;
  for (const auto& e : events) {
    workers.insert(e.worker);
    EXPECT_GT(std::strlen(e.stage), 0u);
    EXPECT_LE(e.begin_us, e.end_us);
  }
  EXPECT_EQ(workers, (std::set<int>{0, 1, 2}));  // the matrix worker and both vector workers
  EXPECT_EQ(shmoe_mega_moe_last_trace(op.handle(), 1, nullptr, nullptr, nullptr, nullptr, nullptr),
            SHMOE_MOE_REFUSED);  // room for one event, but nowhere to write it
}

// num_recv_tokens_per_expert may be NULL (shmoe_mega_moe_run): the same output, fused and
// unfused, and nothing else written.
TEST(MegaCaller, TheTokenCountsAreOptional) {
  Weights w;
  MegaMoE op(config(), w.p1, w.p2);
  const int me = shmem_my_pe(), experts = shmem_n_pes() * kExperts;
  const std::uint64_t seed = test::shared_seed();
  std::vector<std::uint16_t> x(static_cast<std::size_t>(kTokens) * kHidden);
  for (std::size_t i = 0; i < x.size(); ++i)  // k / 8 for small k: exact in bf16
    x[i] = static_cast<std::uint16_t>(0x3e00 + test::mix(seed + me * 977 + i) % 64);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(kTokens) * 2);
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<std::int32_t>(test::mix(seed ^ (me + 1) * 131 ^ i) % experts);
  const std::vector<float> weights(ids.size(), 0.5f);
  std::vector<std::uint16_t> with(x.size()), without(x.size()), unfused(x.size());
  std::vector<std::int32_t> counts(kExperts, -1);
  op.run({x.data(), ids.data(), weights.data(), kTokens, with.data(), counts.data()});
  op.run({x.data(), ids.data(), weights.data(), kTokens, without.data(), nullptr});
  op.run_unfused({x.data(), ids.data(), weights.data(), kTokens, unfused.data(), nullptr});
  EXPECT_EQ(with, without);
  EXPECT_EQ(with, unfused);
  int received = 0;
  for (const std::int32_t c : counts) received += c;
  int expected = 0;  // this PE's experts' rows: every PE's routing, rebuilt from the seed
  for (int pe = 0; pe < shmem_n_pes(); ++pe) {
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const auto e = static_cast<int>(test::mix(seed ^ (pe + 1) * 131 ^ i) % experts);
      expected += e / kExperts == me;
    }
  }
  EXPECT_EQ(received, expected);
}

// Automatic wave rows resolve per PE (128 with the overlapped schedule, 512 otherwise), and the
// senders address each PE's arrival counters by its own: PEs of both kinds in one job give the
// unfused chain's bits (a sender counting by the wrong rows would leave a wave short: a hang).
TEST(MegaCaller, PesWithOtherWaveRowsAddressEachOthersWaves) {
  Weights w;
  MegaMoEConfig c = config();
  constexpr int kMany = 300;  // about 300 rows per expert: several 128-row waves, one of 512
  c.max_tokens_per_pe = kMany;
  c.weights = SHMOE_MEGA_WEIGHTS_FP8;
  c.matrix_workers = 1;
  c.vector_workers = 2;
  const int me = shmem_my_pe(), experts = shmem_n_pes() * kExperts;
  c.schedule = me == 0 ? SHMOE_MEGA_SCHEDULE_OVERLAPPED : SHMOE_MEGA_SCHEDULE_INLINE;
  MegaMoE op(c, w.p1, w.p2);
  EXPECT_EQ(op.info().wave_rows, me == 0 ? 128 : 512);
  for (int call = 0; call < 2; ++call) {  // fresh inputs per call: stale rows would show
    const std::uint64_t seed = test::shared_seed() + static_cast<std::uint64_t>(call) * 7919;
    std::vector<std::uint16_t> x(static_cast<std::size_t>(kMany) * kHidden);
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<std::uint16_t>(0x3e00 + test::mix(seed + me * 977 + i) % 64);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(kMany) * 2);
    for (std::size_t i = 0; i < ids.size(); ++i)
      ids[i] = static_cast<std::int32_t>(test::mix(seed ^ (me + 1) * 131 ^ i) % experts);
    std::vector<float> weights(ids.size());
    for (std::size_t i = 0; i < weights.size(); ++i)
      weights[i] = 0.25f + static_cast<float>(test::mix(seed ^ i * 31) % 4) * 0.125f;
    std::vector<std::uint16_t> fused(x.size()), unfused(x.size());
    op.run({x.data(), ids.data(), weights.data(), kMany, fused.data(), nullptr});
    op.run_unfused({x.data(), ids.data(), weights.data(), kMany, unfused.data(), nullptr});
    EXPECT_EQ(fused, unfused) << "call " << call;
  }
}

}  // namespace
}  // namespace shmoe
