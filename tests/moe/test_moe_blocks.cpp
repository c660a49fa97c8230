// Dispatch's results in receive blocks (shmoe_moe_config_t.recv_blocks, outputs->recv_block),
// through the public API: the senders write each row straight into a block the call takes for the
// caller, the rows stay the caller's over later dispatches until it releases the block, a combine
// reads them from there, and a pool with every block held is refused on every PE by name. Inputs
// are fresh random on every run; each expectation is rebuilt here from the seed (every PE's
// tokens and routing), independently of the operators.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "../pe/pe_test.hpp"
#include "moe_test_values.hpp"
#include "shmoe/moe.hpp"

namespace shmoe {
namespace {

using test::bf16_bits;
using test::error_of;
using test::from_bf16;

constexpr int kL = 2, kTopk = 3, kHidden = 48, kMaxBs = 16, kBlocks = 3;

MoeConfig config(int blocks = kBlocks) {
  MoeConfig c;
  c.num_experts_per_pe = kL;
  c.max_tokens_per_pe = kMaxBs;
  c.hidden = kHidden;
  c.num_topk = kTopk;
  c.dtype = SHMOE_DTYPE_BFLOAT16;
  c.vector_workers = 2;
  c.recv_blocks = blocks;
  c.double_plane_threshold = 256;  // with the double plane, the copy engine writes blocks too
  return c;
}

// PE src's tokens in the call of `seed`, a function of (seed, src) alone: distinct experts per
// token (some slots dropped), weights that are powers of two, rows of k / 8 with |k| < 128, so
// every weighted sum is exact in fp32.
struct Tokens {
  int bs = 0;
  std::vector<std::uint16_t> x;
  std::vector<std::int32_t> ids;
  std::vector<float> weights;
};

Tokens tokens_of(std::uint64_t seed, int src, int n_pes) {
  Tokens in;
  std::uint64_t h = test::mix(seed ^ (0x5bd1e995ull * (src + 1)));
  auto next = [&h] { return h = test::mix(h); };
  in.bs = static_cast<int>(next() % (kMaxBs + 1));
  std::vector<int> experts(static_cast<std::size_t>(n_pes) * kL);
  std::iota(experts.begin(), experts.end(), 0);
  for (int t = 0; t < in.bs; ++t) {
    for (int k = 0; k < kTopk; ++k) {  // a partial shuffle: distinct experts
      std::swap(experts[k], experts[k + next() % (experts.size() - k)]);
      in.ids.push_back(next() % 6 == 0 ? -1 : experts[k]);
      in.weights.push_back(std::ldexp(1.0f, -static_cast<int>(next() % 3)));
    }
    for (int c = 0; c < kHidden; ++c)
      in.x.push_back(bf16_bits(static_cast<float>(static_cast<int>(next() % 255) - 127) / 8));
  }
  return in;
}

std::vector<Tokens> every_pe(std::uint64_t seed, int n) {
  std::vector<Tokens> all;
  for (int pe = 0; pe < n; ++pe) all.push_back(tokens_of(seed, pe, n));
  return all;
}

// One dispatch's result on this PE: its block and the metadata outputs.
struct Result {
  std::uint64_t seed = 0;
  std::int32_t block = -1;
  void* x = nullptr;
  int rows = 0;
  std::vector<std::int32_t> src_info, prefix, per_expert;
  std::vector<float> weights;
};

Result dispatch_to_block(MoeBuffer& op, std::uint64_t seed, const Tokens& in,
                         void* recv_x = nullptr, shmoe_plane_t plane = SHMOE_PLANE_CLASSIC) {
  Result r;
  r.seed = seed;
  const std::size_t cap = op.recv_capacity();
  r.src_info.assign(cap * 3, -7);
  r.prefix.assign(static_cast<std::size_t>(shmem_n_pes()) * kL, -7);
  r.per_expert.assign(kL, -7);
  r.weights.assign(cap, -7);
  DispatchArgs a;
  a.plane = plane;
  a.x = in.x.data();
  a.topk_idx = in.ids.data();
  a.topk_weights = in.weights.data();
  a.num_tokens = in.bs;
  DispatchOutputs o;
  o.recv_x = recv_x;
  o.recv_src_info = r.src_info.data();
  o.recv_layout_prefix = r.prefix.data();
  o.num_recv_tokens_per_expert = r.per_expert.data();
  o.recv_weights = r.weights.data();
  o.recv_block = &r.block;
  o.recv_block_x = &r.x;
  r.rows = op.dispatch(a, o);
  return r;
}

// Checks r against every PE's tokens of its call: the rows this PE's experts get, grouped by
// local expert, then source PE, in token order, each row's bits those of its source token.
void expect_rows(const Result& r, const std::vector<Tokens>& all, int me, const char* when) {
  const int n = static_cast<int>(all.size());
  int row = 0;
  for (int e = 0; e < kL; ++e) {
    for (int src = 0; src < n; ++src) {
      for (int t = 0; t < all[src].bs; ++t) {
        for (int k = 0; k < kTopk; ++k) {
          if (all[src].ids[t * kTopk + k] != me * kL + e) continue;
          ASSERT_LT(row, r.rows) << when;
          const std::int32_t* info = &r.src_info[3 * static_cast<std::size_t>(row)];
          ASSERT_EQ((std::vector<int>{info[0], info[1], info[2]}), (std::vector<int>{src, t, k}))
              << when << ": row " << row;
          ASSERT_EQ(r.weights[row], all[src].weights[t * kTopk + k]) << when << ": row " << row;
          ASSERT_EQ(std::memcmp(static_cast<const std::uint16_t*>(r.x) +
                                    static_cast<std::size_t>(row) * kHidden,
                                &all[src].x[static_cast<std::size_t>(t) * kHidden], kHidden * 2),
                    0)
              << when << ": row " << row << " (PE " << src << ", token " << t << ")";
          ++row;
        }
      }
    }
  }
  ASSERT_EQ(row, r.rows) << when;
}

// The experts scale their rows by 2^slot (exact in bfloat16), in place in the block, or (with
// `to`) into `to`, leaving the block as it was; the combine of those rows must give, exactly,
// sum over k of weight * 2^k * x.
void combine_in_place_and_check(MoeBuffer& op, Result& r, const Tokens& in, void* to = nullptr) {
  const auto* from = static_cast<const std::uint16_t*>(r.x);
  auto* rows = static_cast<std::uint16_t*>(to != nullptr ? to : r.x);
  for (int row = 0; row < r.rows; ++row) {
    const float scale = std::ldexp(1.0f, r.src_info[3 * static_cast<std::size_t>(row) + 2]);
    for (std::size_t i = static_cast<std::size_t>(row) * kHidden;
         i < static_cast<std::size_t>(row + 1) * kHidden; ++i) {
      rows[i] = bf16_bits(from_bf16(from[i]) * scale);
    }
  }
  std::vector<float> out(static_cast<std::size_t>(in.bs) * kHidden, -1);
  CombineArgs c;
  c.x = rows;
  c.src_info = r.src_info.data();
  c.layout_prefix = r.prefix.data();
  c.topk_idx = in.ids.data();
  c.topk_weights = in.weights.data();
  c.num_tokens = in.bs;
  c.combined_x = out.data();
  c.combined_x_float32 = 1;
  op.combine(c);
  for (int t = 0; t < in.bs; ++t) {
    for (int col = 0; col < kHidden; ++col) {
      const std::size_t i = static_cast<std::size_t>(t) * kHidden + col;
      double want = 0;
      for (int k = 0; k < kTopk; ++k) {
        if (in.ids[t * kTopk + k] >= 0)
          want += double{in.weights[t * kTopk + k]} * std::ldexp(1.0, k) * from_bf16(in.x[i]);
      }
      ASSERT_EQ(out[i], static_cast<float>(want)) << "token " << t << " column " << col;
    }
  }
}

// Many calls (on both planes); each PE keeps up to kBlocks results and drops them in its own
// random order. A
// result's rows must be intact when it is dropped (no later dispatch wrote its block), the rows
// never pass through the receive window, and a combine reads the rows the experts wrote in place.
TEST(MoeBlocks, HeldResultsStayIntactAcrossCallsAndBlocksRecycle) {
  MoeBuffer op(config());
  const int n = shmem_n_pes(), me = shmem_my_pe();
  const std::uint64_t seed = test::shared_seed();
  auto* window = static_cast<std::uint8_t*>(op.receive_window());
  const std::size_t window_bytes = op.recv_capacity() * kHidden * 2;
  std::fill_n(window, window_bytes, std::uint8_t{0xA5});
  std::vector<Result> held;
  std::uint64_t drop = test::mix(seed ^ (0xd00dull + me));
  std::size_t engine_bytes = 0;
  for (int call = 0; call < 30; ++call) {
    const std::uint64_t call_seed = test::mix(seed + call);
    drop = test::mix(drop);
    while (held.size() == kBlocks || (!held.empty() && drop % 3 == 0)) {
      const std::size_t which = (drop >> 8) % held.size();
      expect_rows(held[which], every_pe(held[which].seed, n), me, "a held result, when dropped");
      op.release_block(held[which].block);
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(which));
      drop = test::mix(drop);
    }
    const auto all = every_pe(call_seed, n);
    Result r = dispatch_to_block(op, call_seed, all[me], nullptr,
                                 call % 2 ? SHMOE_PLANE_DOUBLE : SHMOE_PLANE_CLASSIC);
    engine_bytes += op.last_timing().bytes_via_copy_engine;
    ASSERT_GE(r.block, 0);
    ASSERT_LT(r.block, kBlocks);
    EXPECT_EQ(op.held_blocks(), static_cast<int>(held.size()) + 1);
    for (const Result& h : held) ASSERT_NE(h.block, r.block) << "a held block was given again";
    expect_rows(r, all, me, "a new result");
    if (call % 3 == 2) combine_in_place_and_check(op, r, all[me]);  // same calls on every PE
    if (call % 3 != 2)
      held.push_back(std::move(r));
    else
      op.release_block(r.block);
  }
  for (const Result& h : held) op.release_block(h.block);
  EXPECT_EQ(op.held_blocks(), 0);
  EXPECT_GT(engine_bytes, 0u) << "the copy engine wrote no block";
  EXPECT_TRUE(std::all_of(window, window + window_bytes, [](std::uint8_t b) { return b == 0xA5; }))
      << "rows went through the receive window";
}

// After dispatches into blocks, each PE (its own random choice per call) writes its experts'
// outputs over the block, or into its receive window in the same layout (as deep_ep's
// low-latency combine stages them) while the block keeps the dispatched rows: either way the
// combine reads each PE's outputs from where that PE put them (in place on one host).
TEST(MoeBlocks, ACombineReadsEachPesOutputsFromItsBlockOrItsWindow) {
  MoeBuffer op(config());
  const int n = shmem_n_pes(), me = shmem_my_pe();
  const std::uint64_t seed = test::shared_seed();
  std::uint64_t mine = test::mix(seed ^ (0x3a11ull + me));
  for (int call = 0; call < 12; ++call) {
    const std::uint64_t call_seed = test::mix(seed + call);
    const auto all = every_pe(call_seed, n);
    Result r = dispatch_to_block(op, call_seed, all[me]);
    expect_rows(r, all, me, "a new result");
    mine = test::mix(mine);
    combine_in_place_and_check(op, r, all[me], mine % 2 ? op.receive_window() : nullptr);
    if (mine % 2) expect_rows(r, all, me, "the block, after its outputs went to the window");
    op.release_block(r.block);
  }
}

TEST(MoeBlocks, APoolWithEveryBlockHeldIsRefusedOnEveryPeByName) {
  MoeBuffer op(config());
  const int n = shmem_n_pes(), me = shmem_my_pe();
  const std::uint64_t seed = test::shared_seed();
  const int holder = static_cast<int>(seed % n);
  std::vector<Result> held;
  for (int call = 0; call < kBlocks; ++call) {
    const std::uint64_t s = test::mix(seed + call);
    Result r = dispatch_to_block(op, s, tokens_of(s, me, n));
    if (me == holder) {
      held.push_back(std::move(r));
    } else {
      op.release_block(r.block);
    }
  }
  const std::uint64_t s = test::mix(seed + kBlocks);
  const Tokens in = tokens_of(s, me, n);
  EXPECT_EQ(error_of([&] { dispatch_to_block(op, s, in); }),
            fmt::format("dispatch: PE {}: all its receive blocks are held (recv_blocks={}): "
                        "release one (shmoe_moe_release_block) or raise recv_blocks",
                        holder, kBlocks));
  EXPECT_EQ(op.held_blocks(), me == holder ? kBlocks : 0);  // the refused call took none
  for (const Result& h : held) expect_rows(h, every_pe(h.seed, n), me, "after the refusal");
  if (me == holder) op.release_block(held[seed / n % kBlocks].block);
  Result r = dispatch_to_block(op, s, in);
  expect_rows(r, every_pe(s, n), me, "after a release");
}

TEST(MoeBlocks, MisuseIsRefusedByName) {
  const int n = shmem_n_pes(), me = shmem_my_pe();
  const std::uint64_t seed = test::shared_seed();
  MoeBuffer op(config());
  EXPECT_EQ(error_of([&] { op.release_block(kBlocks); }),
            fmt::format("shmoe_moe_release_block: block={} is out of range (0..{}, the buffer's "
                        "recv_blocks={})",
                        kBlocks, kBlocks - 1, kBlocks));
  EXPECT_EQ(error_of([&] { op.release_block(0); }),
            "shmoe_moe_release_block: block=0 is not held (released already, or never taken)");
  const Tokens in = tokens_of(seed, me, n);
  const int odd = static_cast<int>(seed % n);
  std::vector<std::uint16_t> mine(op.recv_capacity() * kHidden);
  EXPECT_EQ(
      error_of([&] { dispatch_to_block(op, seed, in, me == odd ? mine.data() : nullptr); }),
      fmt::format("dispatch: PE {}: recv_x and recv_block are both given (one or the other)", odd));
  EXPECT_EQ(op.held_blocks(), 0);
  MoeBuffer none(config(0));
  EXPECT_EQ(error_of([&] { dispatch_to_block(none, seed, in); }),
            "dispatch: PE 0: recv_block is given, but the buffer has no receive blocks "
            "(recv_blocks=0)");
  MoeConfig c = config(65);
  EXPECT_EQ(MoeBuffer::config_error(c, n),
            "shmoe_moe_config_check: recv_blocks=65 is out of range (0..64)");
  c = config(1);
  c.shrink_timeout_ms = 100;
  EXPECT_EQ(MoeBuffer::config_error(c, n),
            "shmoe_moe_config_check: recv_blocks=1 must be 0 in shrink mode (shrink_timeout_ms > "
            "0), whose rows stay in fixed slots");
  EXPECT_GE(
      MoeBuffer::symmetric_bytes(config(kBlocks), n) - MoeBuffer::symmetric_bytes(config(0), n),
      kBlocks * op.recv_capacity() * kHidden * 2);
}

}  // namespace
}  // namespace shmoe
