// What a layer over dispatch and combine (deep_ep's normal mode) asks of them, through the public
// API (shmoe/moe.hpp over shmoe/moe.h): token side data that travels with each row, header ints
// and counts that reach every PE, a caller's verdict (refuse, retry) that every PE learns before
// anything moves, combine's fp32 sums, and a caller mode that every PE must pass alike. Inputs are
// fresh random on every run; every expectation is computed here from the seed, independently of
// the operators.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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
using test::round_to_bf16;

constexpr int kL = 2, kTopk = 2, kHidden = 40, kMaxBs = 12, kSideInts = 3, kHeaderInts = 3;

MoeConfig config() {
  MoeConfig c;
  c.num_experts_per_pe = kL;
  c.max_tokens_per_pe = kMaxBs;
  c.hidden = kHidden;
  c.num_topk = kTopk;
  c.dtype = SHMOE_DTYPE_BFLOAT16;
  c.vector_workers = 2;
  c.token_side_bytes = kSideInts * 4;
  c.header_ints = kHeaderInts;
  return c;
}

// PE src's inputs of one call, a function of (seed, src) alone, so every PE can rebuild every
// PE's: tokens, routing (distinct experts, some dropped), weights (powers of two), token rows
// (k / 8 with |k| < 128: sums of their products stay exact in fp32), side data, header ints.
struct Inputs {
  int bs = 0;
  std::vector<std::uint16_t> x;
  std::vector<std::int32_t> ids;
  std::vector<float> weights;
  std::vector<std::int32_t> side, ints;
};

Inputs inputs_of(std::uint64_t seed, int src, int n_pes) {
  const int E = n_pes * kL;
  Inputs in;
  in.bs = 1 + static_cast<int>(test::mix(seed ^ (0x100u + src)) % kMaxBs);
  for (int t = 0; t < in.bs; ++t) {
    const std::uint64_t h = test::mix(seed ^ (std::uint64_t(src) << 32) ^ (t + 1));
    const int first = static_cast<int>(h % E);
    const int second = (first + 1 + static_cast<int>((h >> 20) % (E - 1))) % E;
    in.ids.push_back((h >> 40) % 8 == 0 ? -1 : first);
    in.ids.push_back((h >> 44) % 8 == 0 ? -1 : second);
    for (int k = 0; k < kTopk; ++k)
      in.weights.push_back(std::ldexp(1.0f, -static_cast<int>((h >> (50 + 2 * k)) % 3)));
    for (int c = 0; c < kHidden; ++c) {
      const auto v = static_cast<int>(test::mix(h + c) % 255) - 127;
      in.x.push_back(bf16_bits(static_cast<float>(v) / 8));
    }
    for (int j = 0; j < kSideInts; ++j)
      in.side.push_back(test::encode<std::int32_t>(seed, src, 0, t * kSideInts + j));
  }
  for (int j = 0; j < kHeaderInts; ++j)
    in.ints.push_back(test::encode<std::int32_t>(seed, src, 1, j));
  return in;
}

struct Received {
  int rows = 0;
  std::vector<std::uint16_t> x;
  std::vector<std::int32_t> assist, recv, nums, side, all_ints, counts;
};

Received make_received(const MoeBuffer& op, int n) {
  Received r;
  const std::size_t cap = op.recv_capacity();
  r.x.assign(cap * kHidden, 0xFFFF);
  r.assist.assign(cap * 3, -7);
  r.recv.assign(static_cast<std::size_t>(n) * kL, -7);
  r.nums.assign(kL, -7);
  r.side.assign(cap * kSideInts, -7);
  r.all_ints.assign(static_cast<std::size_t>(n) * kHeaderInts, -7);
  r.counts.assign(static_cast<std::size_t>(n) * n * kL, -7);
  return r;
}

DispatchArgs args_of(const Inputs& in, shmoe_call_verdict_t verdict) {
  DispatchArgs a;
  a.x = in.x.data();
  a.topk_idx = in.ids.data();
  a.topk_weights = in.weights.data();
  a.num_tokens = in.bs;
  a.token_side = in.side.data();
  a.header_ints = in.ints.data();
  a.verdict = verdict;
  return a;
}

DispatchOutputs outputs_of(Received& r) {
  DispatchOutputs o;
  o.recv_x = r.x.data();
  o.recv_src_info = r.assist.data();
  o.recv_layout_prefix = r.recv.data();
  o.num_recv_tokens_per_expert = r.nums.data();
  o.recv_token_side = r.side.data();
  o.all_header_ints = r.all_ints.data();
  o.all_counts = r.counts.data();
  return o;
}

int dispatch(MoeBuffer& op, const Inputs& in, Received& r,
             shmoe_call_verdict_t verdict = SHMOE_CALL_PROCEED) {
  return op.dispatch(args_of(in, verdict), outputs_of(r));
}

CombineArgs combine_args(const void* x, const Received& r, const Inputs& in, void* out) {
  CombineArgs c;
  c.x = x;
  c.src_info = r.assist.data();
  c.layout_prefix = r.recv.data();
  c.topk_idx = in.ids.data();
  c.topk_weights = in.weights.data();
  c.num_tokens = in.bs;
  c.combined_x = out;
  return c;
}

// One PE's part of a test: the operator, a fresh seed, this PE's inputs and receive buffers.
struct Job {
  MoeBuffer op{config()};
  int n = shmem_n_pes(), me = shmem_my_pe();
  std::uint64_t seed = test::shared_seed();
  Inputs in = inputs_of(seed, me, n);
  Received r = make_received(op, n);
};

TEST(MoeCaller, SideDataHeaderIntsAndCountsReachEveryPe) {
  Job j;
  auto& [op, n, me, seed, in, r] = j;
  std::vector<Inputs> all;
  for (int pe = 0; pe < n; ++pe) all.push_back(inputs_of(seed, pe, n));
  r.rows = dispatch(op, in, r);

  int expected_rows = 0;
  for (int src = 0; src < n; ++src) {
    for (int dst = 0; dst < n; ++dst) {
      for (int e = 0; e < kL; ++e) {
        int count = 0;
        for (int id : all[src].ids) count += id == dst * kL + e;
        EXPECT_EQ(r.counts[(static_cast<std::size_t>(src) * n + dst) * kL + e], count)
            << "counts of PE " << src << " to PE " << dst << " expert " << e;
        if (dst == me) expected_rows += count;
      }
    }
    for (int j = 0; j < kHeaderInts; ++j)
      EXPECT_EQ(r.all_ints[src * kHeaderInts + j], all[src].ints[j])
          << "PE " << src << " int " << j;
  }
  ASSERT_EQ(r.rows, expected_rows);
  for (int row = 0; row < r.rows; ++row) {
    const int src = r.assist[3 * row], t = r.assist[3 * row + 1], k = r.assist[3 * row + 2];
    ASSERT_TRUE(src >= 0 && src < n && t >= 0 && t < all[src].bs && k >= 0 && k < kTopk);
    EXPECT_EQ(all[src].ids[t * kTopk + k] / kL, me) << "row " << row;
    for (int j = 0; j < kSideInts; ++j) {
      EXPECT_EQ(r.side[row * kSideInts + j], all[src].side[t * kSideInts + j])
          << "side data of row " << row << " (PE " << src << ", token " << t << ")";
    }
    EXPECT_EQ(std::memcmp(&r.x[static_cast<std::size_t>(row) * kHidden],
                          &all[src].x[static_cast<std::size_t>(t) * kHidden], kHidden * 2),
              0);
  }
}

TEST(MoeCaller, ARetryFromOnePeReturnsRetryEverywhereWithNothingMoved) {
  Job j;
  auto& [op, n, me, seed, in, r] = j;
  const Received untouched = r;
  const int asking = static_cast<int>(seed % n);
  EXPECT_EQ(dispatch(op, in, r, me == asking ? SHMOE_CALL_RETRY : SHMOE_CALL_PROCEED),
            MoeBuffer::kRetry);
  EXPECT_EQ(r.x, untouched.x);
  EXPECT_EQ(r.side, untouched.side);
  EXPECT_EQ(r.assist, untouched.assist);
  // The operator is usable at once: the same call, every PE proceeding.
  EXPECT_GE(dispatch(op, in, r), 0);
}

TEST(MoeCaller, ARefusalFromOnePeIsEveryPesError) {
  Job j;
  auto& [op, n, me, seed, in, r] = j;
  const int refusing = static_cast<int>(seed % n);
  const std::string e = error_of(
      [&] { dispatch(op, in, r, me == refusing ? SHMOE_CALL_REFUSE : SHMOE_CALL_PROCEED); });
  EXPECT_EQ(e, fmt::format("dispatch: refused on every PE because PE {} refused its inputs (its "
                           "own error says why)",
                           refusing));
  // A verdict outside the enum: that PE is told why, the others that it refused.
  const DispatchArgs args = args_of(in, static_cast<shmoe_call_verdict_t>(me == refusing ? 7 : 0));
  const DispatchOutputs outs = outputs_of(r);
  EXPECT_EQ(shmoe_moe_dispatch(op.handle(), &args, &outs), SHMOE_MOE_REFUSED);
  EXPECT_EQ(std::string(shmoe_moe_last_error()),
            me == refusing ? "shmoe_moe_dispatch: args->verdict=7 is out of range (0..2, "
                             "SHMOE_CALL_PROCEED..SHMOE_CALL_RETRY)"
                           : fmt::format("dispatch: refused on every PE because PE {} refused "
                                         "its inputs (its own error says why)",
                                         refusing));
  EXPECT_GE(dispatch(op, in, r), 0);
}

// Experts that scale each row by (slot + 1), so a token's rows differ by slot.
std::vector<std::uint16_t> expert_outputs(const Received& r) {
  std::vector<std::uint16_t> out(r.x.size());
  for (int row = 0; row < r.rows; ++row) {
    const float scale = static_cast<float>(r.assist[3 * row + 2] + 1);
    for (int c = 0; c < kHidden; ++c) {
      const std::size_t i = static_cast<std::size_t>(row) * kHidden + c;
      out[i] = bf16_bits(from_bf16(r.x[i]) * scale);
    }
  }
  return out;
}

TEST(MoeCaller, CombineGivesFp32SumsThatRoundToItsBf16Result) {
  Job j;
  auto& [op, n, me, seed, in, r] = j;
  r.rows = dispatch(op, in, r);
  const std::vector<std::uint16_t> experts = expert_outputs(r);
  std::vector<float> sums(static_cast<std::size_t>(in.bs) * kHidden, -1);
  std::vector<std::uint16_t> rounded(sums.size(), 0xFFFF);
  CombineArgs c = combine_args(experts.data(), r, in, sums.data());
  c.combined_x_float32 = 1;
  op.combine(c);
  c.combined_x = rounded.data();
  c.combined_x_float32 = 0;
  op.combine(c);
  for (int t = 0; t < in.bs; ++t) {
    for (int col = 0; col < kHidden; ++col) {
      const std::size_t i = static_cast<std::size_t>(t) * kHidden + col;
      double want = 0;  // every term and partial sum is exact in fp32
      for (int k = 0; k < kTopk; ++k) {
        if (in.ids[t * kTopk + k] >= 0)
          want += double{in.weights[t * kTopk + k]} * (k + 1) * from_bf16(in.x[i]);
      }
      ASSERT_EQ(sums[i], static_cast<float>(want)) << "token " << t << " column " << col;
      ASSERT_EQ(rounded[i], round_to_bf16(sums[i])) << "token " << t << " column " << col;
    }
  }
}

TEST(MoeCaller, CombineRefusesModesThatDifferAndARefusingPeOnEveryPe) {
  Job j;
  auto& [op, n, me, seed, in, r] = j;
  r.rows = dispatch(op, in, r);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(in.bs) * kHidden, 0xFFFF);
  const std::vector<std::uint16_t> untouched = out;
  CombineArgs c = combine_args(r.x.data(), r, in, out.data());
  const int odd = static_cast<int>(seed % n);
  c.caller_mode = me == odd ? 5 : 3;
  const std::string e = error_of([&] { op.combine(c); });
  if (n > 1) {
    EXPECT_NE(e.find("combine: PEs disagree on caller_mode: PE "), std::string::npos) << e;
    EXPECT_NE(e.find(fmt::format("PE {} passed 5", odd)), std::string::npos) << e;
    EXPECT_EQ(out, untouched);  // refused before the reduction
  }
  c.caller_mode = 0;
  c.verdict = me == odd ? SHMOE_CALL_REFUSE : SHMOE_CALL_PROCEED;
  EXPECT_EQ(error_of([&] { op.combine(c); }),
            me == odd ? fmt::format("combine: PE {}: the caller refused its inputs (its own error "
                                    "says why)",
                                    odd)
                      : fmt::format("combine: refused on every PE because PE {} refused its "
                                    "inputs (its own error says why)",
                                    odd));
  c.verdict = SHMOE_CALL_PROCEED;
  op.combine(c);  // usable again
  EXPECT_NE(out, untouched);
}

}  // namespace
}  // namespace shmoe

namespace shmoe {
namespace {

// What a launcher asks of a configuration before it starts any PE: the operators' rules (with
// the fields named as shmoe_moe_config_t spells them) and the symmetric heap a buffer takes.
TEST(MoeCaller, ConfigCheckNamesTheFieldAndSymmetricBytesCoverTheWindow) {
  const int n = shmem_n_pes();
  EXPECT_EQ(MoeBuffer::config_error(config(), n), "");
  MoeConfig c = config();
  c.num_topk = n * kL + 1;
  EXPECT_EQ(MoeBuffer::config_error(c, n),
            fmt::format("shmoe_moe_config_check: num_topk={} is out of range (1..{}, the expert "
                        "count {} PEs x {} experts)",
                        n * kL + 1, n * kL, n, kL));
  EXPECT_EQ(MoeBuffer::symmetric_bytes(c, n), 0u);  // refused: no size
  c = config();
  c.matrix_workers = 200;
  c.vector_workers = 100;
  EXPECT_EQ(MoeBuffer::config_error(c, n),
            "shmoe_moe_config_check: matrix_workers/vector_workers: matrix=200 vector=100 are out "
            "of range (0..256 in all)");
  c = config();
  c.shrink_timeout_ms = 100;
  c.max_recv_rows = 5;
  EXPECT_NE(MoeBuffer::config_error(c, n).find("max_recv_rows=5 must be 0 in shrink mode "
                                               "(shrink_timeout_ms > 0)"),
            std::string::npos);
  EXPECT_EQ(MoeBuffer::config_error(config(), 0), "shmoe_moe_config_check: n_pes=0 is not >= 1");

  // The receive window alone is recv_capacity rows of hidden bf16 values; a larger hidden
  // takes more.
  MoeBuffer op(config());
  const std::size_t bytes = MoeBuffer::symmetric_bytes(config(), n);
  EXPECT_GE(bytes, op.recv_capacity() * kHidden * 2);
  MoeConfig wider = config();
  wider.hidden = 2 * kHidden;
  EXPECT_GT(MoeBuffer::symmetric_bytes(wider, n), bytes);
}

// The per-worker times of the last call: one per worker, the largest being the timing's max.
TEST(MoeCaller, LastWorkerTimesGiveEachWorkerAndTheirMaxIsTheTimings) {
  Job j;
  std::vector<double> us;
  j.op.last_worker_times(us);  // before any call: no workers measured
  EXPECT_TRUE(us.empty());
  j.r.rows = dispatch(j.op, j.in, j.r);
  const MoeTiming t = j.op.last_timing();
  ASSERT_EQ(t.workers, 2);  // config(): vector_workers = 2
  j.op.last_worker_times(us);
  ASSERT_EQ(us.size(), 2u);
  for (double v : us) EXPECT_GE(v, 0.0);
  EXPECT_EQ(*std::max_element(us.begin(), us.end()), t.worker_us_max);
  double three[3];
  EXPECT_EQ(shmoe_moe_last_worker_times(j.op.handle(), three, 3), SHMOE_MOE_REFUSED);
  EXPECT_EQ(std::string(shmoe_moe_last_error()),
            "shmoe_moe_last_worker_times: n_workers=3 is not this buffer's worker count 2 "
            "(shmoe_moe_timing_t.workers)");
}

}  // namespace
}  // namespace shmoe
