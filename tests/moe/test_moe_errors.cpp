// Refused calls: bad expert ids, a window too small, PEs that disagree on the parameters, topk
// above the expert count. Every PE must throw the same message (naming the PE, the tensor, the
// index and the limit), and the context must stay usable for the next call.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "../pe/pe_test.hpp"
#include "moe/moe.hpp"

namespace shmoe::moe {
namespace {

struct Buffers {
  std::vector<float> x;
  std::vector<std::int32_t> ids;
  std::vector<float> scales;
  std::vector<float> expand, expert_out, out;
  std::vector<std::int32_t> assist, recv, nums;
};

Buffers make_buffers(const MoeContext& ctx, int bs, std::uint64_t seed) {
  const auto& c = ctx.config();
  const int E = ctx.n_pes() * c.experts_per_pe;
  Buffers r;
  r.x.resize(static_cast<std::size_t>(bs) * c.hidden);
  for (std::size_t i = 0; i < r.x.size(); ++i)
    r.x[i] = static_cast<float>(test::mix(seed + i) % 100);
  for (int t = 0; t < bs; ++t) {
    for (int k = 0; k < c.topk; ++k) r.ids.push_back((t + k) % E);
  }
  r.scales.assign(r.ids.size(), 0.5f);
  const std::size_t cap = ctx.recv_capacity();
  r.expand.resize(cap * c.hidden);
  r.assist.resize(cap * 3);
  r.recv.resize(static_cast<std::size_t>(ctx.n_pes()) * c.experts_per_pe);
  r.nums.resize(c.experts_per_pe);
  return r;
}

int dispatch(MoeContext& ctx, Buffers& r, int bs) {
  return dispatch_classic(
      ctx, {r.x.data(), r.ids.data(), r.scales.data(), bs},
      {r.expand.data(), r.assist.data(), r.recv.data(), r.nums.data(), nullptr});
}

std::string dispatch_error(MoeContext& ctx, Buffers& r, int bs) {
  try {
    dispatch(ctx, r, bs);
  } catch (const MoeError& e) {
    return e.what();
  }
  return "";
}

MoeConfig small_config() {
  MoeConfig c;
  c.experts_per_pe = 2;
  c.max_bs = 8;
  c.hidden = 4;
  c.topk = 2;
  c.dtype = DType::kFloat32;
  c.workers = {0, 2};
  return c;
}

TEST(MoeErrors, ExpertOutOfRangeIsRefusedOnEveryPeAndTheContextStaysUsable) {
  MoeContext ctx(small_config());
  const int n = ctx.n_pes(), me = ctx.my_pe();
  Buffers r = make_buffers(ctx, 8, test::shared_seed());
  const std::int32_t good = r.ids[3 * 2 + 1];
  if (me == n - 1) r.ids[3 * 2 + 1] = 999;
  const std::string want = fmt::format(
      "dispatch: PE {}: expert_ids[3][1]=999 is out of range (0..{}, or -1 for no expert)", n - 1,
      2 * n - 1);
  EXPECT_EQ(dispatch_error(ctx, r, 8), want);
  if (me == n - 1) r.ids[3 * 2 + 1] = -2;
  EXPECT_NE(dispatch_error(ctx, r, 8).find("expert_ids[3][1]=-2 is out of range"),
            std::string::npos);
  if (me == n - 1) r.ids[3 * 2 + 1] = good;
  // Every PE routes alike, so this PE receives n times the entries that name its experts.
  int mine = 0;
  for (auto e : r.ids) mine += e / 2 == me;
  EXPECT_EQ(dispatch(ctx, r, 8), n * mine) << "a good call after refused ones";
}

TEST(MoeErrors, BsAboveMaxIsRefusedOnEveryPe) {
  MoeContext ctx(small_config());
  Buffers r = make_buffers(ctx, 9, 1);
  const int bs = ctx.my_pe() == 0 ? 9 : 8;
  EXPECT_EQ(dispatch_error(ctx, r, bs),
            "dispatch: PE 0: bs=9 is out of range (0..8, the context's max_bs)");
}

TEST(MoeErrors, WindowOverflowIsRefusedNamingTheReceiver) {
  MoeConfig c = small_config();
  c.max_recv_rows = 5;
  MoeContext ctx(c);
  Buffers r = make_buffers(ctx, 8, 2);
  // Everyone sends every row to expert 0 on PE 0: n * 16 rows for a window of 5.
  std::fill(r.ids.begin(), r.ids.end(), 0);
  for (std::size_t i = 1; i < r.ids.size(); i += 2) r.ids[i] = 1;
  EXPECT_EQ(dispatch_error(ctx, r, 8),
            fmt::format("dispatch: PE 0 would receive {} rows, but its window holds 5 "
                        "(max_recv_rows); raise max_recv_rows (and SHMEM_SYMMETRIC_SIZE if needed)",
                        ctx.n_pes() * 16));
  // Within the window: 1 token per PE, one slot routed.
  for (std::size_t i = 0; i < r.ids.size(); ++i) r.ids[i] = i == 0 ? 0 : -1;
  if (ctx.n_pes() <= 5) {
    EXPECT_EQ(dispatch(ctx, r, 8), ctx.my_pe() == 0 ? ctx.n_pes() : 0);
  }
}

TEST(MoeErrors, PesThatDisagreeOnTopkAreNamed) {
  MoeConfig c = small_config();
  c.max_recv_rows = 64;
  if (shmem_my_pe() == 1) c.topk = 1;
  MoeContext ctx(c);
  Buffers r = make_buffers(ctx, 8, 3);
  const std::string e = dispatch_error(ctx, r, 8);
  EXPECT_NE(e.find("dispatch: PEs disagree on the parameters"), std::string::npos) << e;
  EXPECT_NE(e.find("topk=1"), std::string::npos) << e;
}

TEST(MoeErrors, TopkAboveTheExpertCountIsRefused) {
  MoeConfig c = small_config();
  c.topk = 2 * shmem_n_pes() + 1;
  try {
    MoeContext ctx(c);
    ADD_FAILURE() << "accepted topk above the expert count";
  } catch (const MoeError& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("MoeContext: topk={} is out of range (1..{}, the expert count {} PEs x 2 "
                          "experts)",
                          c.topk, 2 * shmem_n_pes(), shmem_n_pes()));
  }
}

// Buffers under SHMOE_TEST_SKIP_COMBINE_PE=p: that PE never calls combine, and the others must
// report, by name, that they wait for it.
TEST(MoeHang, PeThatSkipsCombine) {
  MoeContext ctx(small_config());
  Buffers r = make_buffers(ctx, 8, 4);
  const int rows = dispatch(ctx, r, 8);
  r.expert_out = r.expand;
  r.out.resize(r.x.size());
  const char* skip = std::getenv("SHMOE_TEST_SKIP_COMBINE_PE");
  if (skip != nullptr && std::atoi(skip) == ctx.my_pe()) {
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return;
  }
  (void)rows;
  combine_classic(ctx, {r.expert_out.data(), r.assist.data(), r.recv.data(), r.ids.data(),
                        r.scales.data(), 8, r.out.data()});
}

}  // namespace
}  // namespace shmoe::moe
