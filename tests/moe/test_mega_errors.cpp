// MegaMoE refusals through the C++ API, in real PEs: every PE must throw the same message, naming
// the PE and the value, and the operator must stay usable for the next call.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <shmem.h>

#include <string>
#include <vector>

#include "../pe/pe_test.hpp"
#include "moe/mega_moe.hpp"

namespace shmoe::moe {
namespace {

constexpr int kTokens = 4, kModel = 32, kFfn = 64, kExperts = 2;

// Weights of kExperts experts (all codes 0x38 = 1.0 in E4M3, scales 2^-5): the values do not
// matter for refusals, only that they are valid.
struct Weights {
  ExpertFfnShape shape{kModel, kFfn, numeric::Fp8Format::kE4M3};
  std::vector<std::uint8_t> w1, w2;
  MegaMoEWeights view;
  Weights() {
    auto fill = [](std::vector<std::uint8_t>& v, int rows, MxRow row) {
      v.assign(static_cast<std::size_t>(rows) * row.bytes(), 0x38);
      for (int r = 0; r < rows; ++r) {
        for (std::size_t b = 0; b < numeric::mx_num_blocks(row.elems); ++b)
          v[r * row.bytes() + row.scales_offset() + b] = 127 - 5;
      }
    };
    fill(w1, kFfn, shape.token_row());
    fill(w2, kModel, shape.act_row());
    for (int e = 0; e < kExperts; ++e) {
      view.w1.push_back(w1.data());
      view.w2.push_back(w2.data());
    }
  }
};

MegaMoEConfig config() {
  MegaMoEConfig c;
  c.tokens = kTokens;
  c.model_dim = kModel;
  c.ffn_dim = kFfn;
  c.topk = 2;
  c.experts_per_pe = kExperts;
  return c;
}

struct Call {
  std::vector<std::uint16_t> x = std::vector<std::uint16_t>(kTokens * kModel, 0x3f80);  // 1.0
  std::vector<std::int32_t> ids;
  std::vector<float> weights = std::vector<float>(kTokens * 2, 0.5f);
  std::vector<std::uint16_t> y = std::vector<std::uint16_t>(kTokens * kModel);
  std::vector<std::int32_t> counts = std::vector<std::int32_t>(kExperts);
  explicit Call(int n_experts) {
    for (int t = 0; t < kTokens; ++t) {
      ids.push_back(t % n_experts);
      ids.push_back((t + 1) % n_experts);
    }
  }
  MegaMoEArgs args() {
    return {x.data(), ids.data(), weights.data(), kTokens, y.data(), counts.data()};
  }
};

std::string run_error(MegaMoE& op, Call& call) {
  try {
    op.run(call.args());
  } catch (const Refused& e) {
    return e.what();
  }
  return "";
}

TEST(MegaErrors, ExpertIdOutOfRangeIsRefusedOnEveryPe) {
  Weights w;
  MegaMoE op(config(), w.view);
  const int E = shmem_n_pes() * kExperts;
  Call call(E);
  if (shmem_my_pe() == shmem_n_pes() - 1) call.ids[3] = E + 5;
  EXPECT_EQ(run_error(op, call),
            fmt::format("MegaMoE: PE {}: topk_idx[1][1]={} is out of range (0..{}, or -1 for "
                        "no expert)",
                        shmem_n_pes() - 1, E + 5, E - 1));
  // Still usable: the next call goes through and counts every row.
  Call good(E);
  op.run(good.args());
  static int received, total;
  received = 0;
  for (int c : good.counts) received += c;
  auto* sym = static_cast<int*>(shmem_malloc(2 * sizeof(int)));
  sym[0] = received;
  shmem_int_sum_reduce(SHMEM_TEAM_WORLD, sym + 1, sym, 1);
  total = sym[1];
  shmem_free(sym);
  EXPECT_EQ(total, shmem_n_pes() * kTokens * 2);
}

TEST(MegaErrors, MoreTokensThanConfiguredAreRefusedOnEveryPe) {
  Weights w;
  MegaMoE op(config(), w.view);
  Call call(shmem_n_pes() * kExperts);
  MegaMoEArgs args = call.args();
  if (shmem_my_pe() == 0) args.tokens = kTokens + 1;  // its buffers are too short: never read
  try {
    op.run(args);
    ADD_FAILURE() << "accepted tokens above the configured maximum";
  } catch (const Refused& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("MegaMoE: PE 0: tokens={} is out of range (0..{}, the operator's "
                          "configured tokens)",
                          kTokens + 1, kTokens));
  }
}

TEST(MegaErrors, PesThatDisagreeOnFfnDimAreNamed) {
  Weights w;
  MegaMoEConfig c = config();
  if (shmem_my_pe() == 1) c.ffn_dim = kFfn - 2;
  MegaMoE op(c, w.view);
  Call call(shmem_n_pes() * kExperts);
  const std::string e = run_error(op, call);
  EXPECT_NE(e.find("MegaMoE: PEs disagree on the parameters"), std::string::npos) << e;
  EXPECT_NE(e.find(fmt::format("intermediate_hidden={}", kFfn - 2)), std::string::npos) << e;
}

TEST(MegaErrors, MoreReceivedTokensThanTheWindowHoldsIsRefused) {
  Weights w;
  MegaMoEConfig c = config();
  c.max_received_tokens = 3;
  MegaMoE op(c, w.view);
  Call call(shmem_n_pes() * kExperts);
  for (auto& id : call.ids) id = 0;  // every row to PE 0
  call.ids[1] = 1;                   // two distinct experts per token
  for (int t = 1; t < kTokens; ++t) call.ids[2 * t + 1] = 1;
  const std::string e = run_error(op, call);
  EXPECT_NE(e.find(fmt::format("MegaMoE: PE 0 would receive {} rows, but its window holds 3",
                               shmem_n_pes() * kTokens * 2)),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("MAX_RECEIVED_TOKENS"), std::string::npos) << e;
}

TEST(MegaErrors, WorkersNotInOneToTwoRatioAreRefused) {
  Weights w;
  MegaMoEConfig c = config();
  c.workers = {2, 3};
  try {
    MegaMoE op(c, w.view);
    ADD_FAILURE() << "accepted 2 matrix and 3 vector workers";
  } catch (const Refused& e) {
    EXPECT_EQ(std::string(e.what()),
              "MegaMoE: workers.matrix=2 and workers.vector=3: give both or neither, with "
              "workers.vector = 2 x workers.matrix and workers.matrix in 1..64");
  }
}

}  // namespace
}  // namespace shmoe::moe
