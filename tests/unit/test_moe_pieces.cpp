// The pure pieces of the MoE protocol and the transports, which multi-PE runs exercise only as a
// whole: route planning, the call-error verdict, the copy-engine split, the weighted reduction,
// MegaMoE's waves, the AMO on a word and the narrow AMO by compare-and-swap. Checked here against
// independent references: a brute-force placement of every row, fp64 sums, a row-by-row walk,
// and plain integer arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "moe/combine_reduce.hpp"
#include "moe/context_state.hpp"
#include "moe/mega_state.hpp"
#include "moe/protocol.hpp"
#include "moe/route_plan.hpp"
#include "transport/narrow_atomic.hpp"
#include "transport/shm_transport.hpp"

namespace shmoe::moe {
namespace {

// Every PE's routing of one call, and the headers the exchange would have delivered.
struct Routing {
  int P, L, bs, topk;
  std::vector<std::vector<std::int32_t>> ids;  // [src][token * topk + slot]
};

Routing random_routing(std::mt19937_64& rng, int P, int L, int bs, int topk) {
  Routing r{P, L, bs, topk, {}};
  std::uniform_int_distribution<int> expert(-1, P * L - 1);  // -1: no expert
  for (int src = 0; src < P; ++src) {
    std::vector<std::int32_t> ids(static_cast<std::size_t>(bs) * topk);
    for (auto& e : ids) e = expert(rng);
    r.ids.push_back(std::move(ids));
  }
  return r;
}

// Fills a header exchange for call g as every PE's fill_route_header would, in plain memory.
struct Headers {
  std::vector<std::byte> window;
  HeaderExchange hx;
  Headers(const Routing& r, std::uint64_t g, int max_bs)
      : window(HeaderExchange::bytes(r.P, r.L)), hx(window.data(), r.P, r.L) {
    for (int src = 0; src < r.P; ++src) {
      CallHeader& h = *hx.mine(g, src);
      h = CallHeader{};
      fill_route_header(h, hx.counts(g, src), r.ids[src].data(), r.bs, max_bs, r.topk, r.P * r.L);
    }
  }
};

// Where each row lands, by brute force: destination dst's rows are ordered by (local expert,
// source PE, token, slot); a row's position is its index in that order.
std::vector<std::int64_t> brute_force_positions(const Routing& r, int me) {
  std::vector<std::int64_t> want(r.ids[me].size(), -1);
  for (int dst = 0; dst < r.P; ++dst) {
    std::int64_t row = 0;
    for (int e = 0; e < r.L; ++e) {
      for (int src = 0; src < r.P; ++src) {
        for (std::size_t i = 0; i < r.ids[src].size(); ++i) {
          if (r.ids[src][i] != dst * r.L + e) continue;
          if (src == me) want[i] = row;
          ++row;
        }
      }
    }
  }
  return want;
}

TEST(RoutePlan, EveryRowLandsWhereTheOrderSaysOnEveryPe) {
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 50; ++trial) {
    const int P = 1 + static_cast<int>(rng() % 5), L = 1 + static_cast<int>(rng() % 3);
    const int bs = static_cast<int>(rng() % 9), topk = 1 + static_cast<int>(rng() % 3);
    const Routing r = random_routing(rng, P, L, bs, topk);
    const std::uint64_t g = 1 + rng() % 1000;
    Headers h(r, g, 8);
    for (int me = 0; me < P; ++me) {
      RoutePlan plan;
      const std::string error =
          plan_routes(h.hx, g, me, P, L, r.ids[me].data(), bs, topk,
                      std::numeric_limits<std::size_t>::max(), "op", "cap", plan);
      ASSERT_EQ(error, "");
      EXPECT_EQ(plan.positions, brute_force_positions(r, me)) << "trial " << trial << " PE " << me;
      for (int dst = 0; dst < P; ++dst) {
        std::int64_t want = 0;
        for (int src = 0; src < P; ++src) {
          for (auto e : r.ids[src]) want += e >= 0 && e / L == dst;
        }
        EXPECT_EQ(plan.rows_to(dst), want);
      }
    }
  }
}

TEST(RoutePlan, ADestinationOverItsCapacityIsNamedAlikeOnEveryPe) {
  // Two PEs, one expert each; every row of both goes to PE 1's expert.
  Routing r{2, 1, 3, 2, {{1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, -1, 1}}};
  Headers h(r, 7, 8);
  for (int me = 0; me < 2; ++me) {
    RoutePlan plan;
    EXPECT_EQ(plan_routes(h.hx, 7, me, 2, 1, r.ids[me].data(), 3, 2, 10, "dispatch",
                          "max_recv_rows", plan),
              "dispatch: PE 1 would receive 11 rows, but its window holds 10 (max_recv_rows); "
              "raise max_recv_rows (and SHMEM_SYMMETRIC_SIZE if needed)");
    EXPECT_EQ(plan_routes(h.hx, 7, me, 2, 1, r.ids[me].data(), 3, 2, 11, "dispatch",
                          "max_recv_rows", plan),
              "");
  }
}

TEST(CallError, TheFirstErrorInPeOrderAndParameterMismatchesFirst) {
  std::vector<CallHeader> h(3);
  for (auto& x : h) {
    x.hidden = 16;
    x.topk = 2;
    x.experts_per_pe = 2;
    x.dtype = 1;
  }
  auto headers = [&] {
    std::vector<const CallHeader*> v;
    for (auto& x : h) v.push_back(&x);
    return v;
  };
  EXPECT_EQ(first_call_error("dispatch", headers(), 0, 6, 8), "");
  h[2].error = InputError::kBsOutOfRange;
  h[2].error_index[0] = 9;
  h[2].error_index[1] = 8;
  h[1].error = InputError::kExpertOutOfRange;
  h[1].error_index[0] = 3;
  h[1].error_index[1] = 1;
  h[1].error_index[2] = 42;
  // PE 1's error comes before PE 2's, whichever PE asks.
  for (int me = 0; me < 3; ++me) {
    EXPECT_EQ(first_call_error("dispatch", headers(), me, 6, 8),
              "dispatch: PE 1: topk_idx[3][1]=42 is out of range (0..5, or -1 for no expert)");
  }
  h[1].error = InputError::kNone;
  EXPECT_EQ(first_call_error("mega", headers(), 0, 6, 8, "tokens", "the configured tokens"),
            "mega: PE 2: tokens=9 is out of range (0..8, the configured tokens)");
  // A parameter mismatch is reported before any input error.
  h[0].topk = 3;
  EXPECT_EQ(
      first_call_error("dispatch", headers(), 0, 6, 8),
      "dispatch: PEs disagree on the parameters (num_topk): PE 1 called with hidden=16 num_topk=2 "
      "num_experts_per_pe=2 dtype=1 intermediate_hidden=0, PE 0 with hidden=16 num_topk=3 "
      "num_experts_per_pe=2 dtype=1 "
      "intermediate_hidden=0");
}

TEST(CopyEngineSplit, OnlySegmentsAboveTheThresholdAndTheAverage) {
  EXPECT_EQ(segments_for_copy_engine({}, 1), std::vector<bool>{});
  EXPECT_EQ(segments_for_copy_engine({0, 0}, 0), (std::vector<bool>{false, false}));
  // Average of the non-empty segments: (10 + 30 + 50) / 3 = 30.
  EXPECT_EQ(segments_for_copy_engine({10, 0, 30, 50}, 20),
            (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(segments_for_copy_engine({10, 0, 30, 50}, 60),
            (std::vector<bool>{false, false, false, false}));
  // Equal segments: none is above the average, so the workers take them all.
  EXPECT_EQ(segments_for_copy_engine({64, 64, 64}, 1), (std::vector<bool>{false, false, false}));
}

// Every reduction path this CPU can run (the baseline always), so each one is held to the contract.
std::vector<ReducePath> paths_this_cpu_has() {
  std::vector<ReducePath> paths;
  for (ReducePath p : {ReducePath::kBaseline, ReducePath::kAvx2, ReducePath::kAvx512})
    if (reduce_path_available(p)) paths.push_back(p);
  return paths;
}
const char* path_name(ReducePath p) {
  return p == ReducePath::kAvx512 ? "avx512" : p == ReducePath::kAvx2 ? "avx2" : "baseline";
}

TEST(WeightedReduction, Fp32InIncreasingSlotOrderSkippingMissingExperts) {
  std::mt19937_64 rng(std::random_device{}());
  const int tokens = 7, topk = 3, hidden = 33;
  std::normal_distribution<float> value(0.0f, 3.0f);
  std::vector<float> rows(static_cast<std::size_t>(tokens) * topk * hidden), weights(tokens * topk);
  std::vector<std::int32_t> ids(tokens * topk);
  for (auto& v : rows) v = value(rng);
  for (auto& w : weights) w = value(rng);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = rng() % 4 == 0 ? -1 : 1;
  for (const ReducePath path : paths_this_cpu_has()) {
    SCOPED_TRACE(path_name(path));
    std::vector<float> out(static_cast<std::size_t>(tokens) * hidden, -7.0f);
    WeightedRows w{DType::kFloat32,
                   hidden,
                   topk,
                   reinterpret_cast<const std::byte*>(rows.data()),
                   hidden * sizeof(float),
                   ids.data(),
                   weights.data(),
                   out.data()};
    reduce_weighted_rows_on(path, w, 2, 6);  // tokens 2..5 only
    for (int t = 0; t < tokens; ++t) {
      for (int h = 0; h < hidden; ++h) {
        const float got = out[static_cast<std::size_t>(t) * hidden + h];
        if (t < 2 || t >= 6) {
          EXPECT_EQ(got, -7.0f) << "token " << t << " is outside [first, last)";
          continue;
        }
        float fp32 = 0.0f;  // the order the contract names: increasing k, fp32
        double fp64 = 0.0;
        for (int k = 0; k < topk; ++k) {
          if (ids[t * topk + k] < 0) continue;
          const float x = rows[(static_cast<std::size_t>(t) * topk + k) * hidden + h];
          fp32 += x * weights[t * topk + k];
          fp64 += static_cast<double>(x) * weights[t * topk + k];
        }
        EXPECT_EQ(got, fp32) << "token " << t << " element " << h;
        EXPECT_NEAR(got, fp64, 1e-5 * (1.0 + std::abs(fp64)));
      }
    }
  }
}

// The waves by walking every received row in order: row i of expert e belongs to wave
// (e, i / wave_rows), and a wave is a run of rows with the same key.
std::vector<Wave> waves_row_by_row(const std::vector<std::int64_t>& rows_per_expert, int W) {
  std::vector<Wave> waves;
  std::int64_t row = 0;
  long last_key = -1;
  for (std::size_t e = 0; e < rows_per_expert.size(); ++e) {
    for (std::int64_t i = 0; i < rows_per_expert[e]; ++i, ++row) {
      const long key = static_cast<long>(e) * 1000000 + static_cast<long>(i / W);
      if (key != last_key) waves.push_back({static_cast<int>(e), row, 0});
      ++waves.back().rows;
      last_key = key;
    }
  }
  return waves;
}

TEST(CutWaves, EveryRowOnceInWavesOfAtMostWaveRowsPerExpert) {
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 200; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 6), W = 1 + static_cast<int>(rng() % 9);
    std::vector<std::int64_t> rows(L);
    for (auto& n : rows) n = rng() % 3 == 0 ? 0 : static_cast<std::int64_t>(rng() % 40);
    const std::vector<Wave> got = cut_waves(rows, W);
    const std::vector<Wave> want = waves_row_by_row(rows, W);
    ASSERT_EQ(got.size(), want.size()) << "trial " << trial << " W " << W;
    for (std::size_t v = 0; v < want.size(); ++v) {
      EXPECT_EQ(got[v].expert, want[v].expert) << "wave " << v;
      EXPECT_EQ(got[v].row0, want[v].row0) << "wave " << v;
      EXPECT_EQ(got[v].rows, want[v].rows) << "wave " << v;
    }
  }
  EXPECT_TRUE(cut_waves({0, 0, 0}, 4).empty());
  const std::vector<Wave> one = cut_waves({0, 5, 0, 4}, 4);
  ASSERT_EQ(one.size(), 3u);
  EXPECT_EQ(one[2].expert, 3);
  EXPECT_EQ(one[2].row0, 5);
  EXPECT_EQ(one[2].rows, 4);
}

// Rows read where they lie (row_at, as combine does from the experts' windows), in bf16, across
// several column slices with a partial last one: each element is still the fp32 sum in increasing
// k, rounded once to bf16; asked for the sums (out_float32), the fp32 sum itself.
TEST(WeightedReduction, RowsReadInPlaceAcrossColumnSlices) {
  std::mt19937_64 rng(std::random_device{}());
  const int tokens = 5, topk = 4, hidden = 1100;
  std::normal_distribution<float> value(0.0f, 3.0f);
  const std::size_t row_bytes = hidden * sizeof(std::uint16_t);
  // The rows lie in reverse order, one row of padding apart, nowhere near t * topk + k.
  std::vector<std::uint16_t> store(static_cast<std::size_t>(tokens) * topk * 2 * hidden);
  for (auto& v : store) v = numeric::float_to_bf16(value(rng)).bits;
  std::vector<const std::byte*> row_at(tokens * topk);
  for (std::size_t i = 0; i < row_at.size(); ++i) {
    row_at[i] = reinterpret_cast<const std::byte*>(store.data()) +
                (2 * (row_at.size() - 1 - i) + 1) * row_bytes;
  }
  std::vector<float> weights(tokens * topk);
  for (auto& w : weights) w = value(rng);
  std::vector<std::int32_t> ids(tokens * topk);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = rng() % 3 == 0 ? -1 : 0;
  for (const ReducePath path : paths_this_cpu_has()) {
    SCOPED_TRACE(path_name(path));
    std::vector<std::uint16_t> out(static_cast<std::size_t>(tokens) * hidden, 0xFFFF);
    WeightedRows w{DType::kBFloat16, hidden,         topk,       nullptr,      row_bytes,
                   ids.data(),       weights.data(), out.data(), row_at.data()};
    reduce_weighted_rows_on(path, w, 1, tokens);
    std::vector<float> sums(static_cast<std::size_t>(tokens) * hidden, -1.0f);
    WeightedRows s = w;
    s.out = sums.data();
    s.out_float32 = true;
    reduce_weighted_rows_on(path, s, 1, tokens);
    for (int t = 0; t < tokens; ++t) {
      for (int h = 0; h < hidden; ++h) {
        const std::uint16_t got = out[static_cast<std::size_t>(t) * hidden + h];
        const float sum = sums[static_cast<std::size_t>(t) * hidden + h];
        if (t == 0) {
          ASSERT_EQ(got, 0xFFFF) << "token 0 is outside [first, last)";
          ASSERT_EQ(sum, -1.0f) << "token 0 is outside [first, last)";
          continue;
        }
        float fp32 = 0.0f;
        for (int k = 0; k < topk; ++k) {
          const std::size_t i = static_cast<std::size_t>(t) * topk + k;
          if (ids[i] < 0) continue;
          const auto* row = reinterpret_cast<const std::uint16_t*>(row_at[i]);
          fp32 += numeric::bf16_to_float({row[h]}) * weights[i];
        }
        ASSERT_EQ(got, numeric::float_to_bf16(fp32).bits) << "token " << t << " element " << h;
        ASSERT_EQ(sum, fp32) << "fp32 sums: token " << t << " element " << h;
      }
    }
  }
}

}  // namespace
}  // namespace shmoe::moe

namespace shmoe::transport {
namespace {

template <typename T>
void check_every_op(T start, T operand, T compare) {
  using U = std::make_unsigned_t<T>;
  const auto bits = [](T v) { return static_cast<std::uint64_t>(static_cast<U>(v)); };
  struct Case {
    AmoOp op;
    T want_after;
    T want_returned;
  };
  const Case cases[] = {
      {AmoOp::kLoad, start, start},
      {AmoOp::kStore, operand, T{0}},
      {AmoOp::kSwap, operand, start},
      {AmoOp::kCompareSwap, start == compare ? operand : start, start},
      {AmoOp::kAdd, static_cast<T>(static_cast<U>(start) + static_cast<U>(operand)), start},
      {AmoOp::kAnd, static_cast<T>(start & operand), start},
      {AmoOp::kOr, static_cast<T>(start | operand), start},
      {AmoOp::kXor, static_cast<T>(start ^ operand), start},
  };
  for (const Case& c : cases) {
    // The word sits between two guards that no operation may touch.
    struct {
      T before, word, after;
    } mem{static_cast<T>(0x5A), start, static_cast<T>(0x5A)};
    const std::uint64_t got = atomic_on_word(
        &mem.word, {c.op, static_cast<std::uint8_t>(sizeof(T)), bits(operand), bits(compare)});
    if (c.op != AmoOp::kStore) {
      EXPECT_EQ(static_cast<T>(got), c.want_returned) << static_cast<int>(c.op);
    }
    EXPECT_EQ(mem.word, c.want_after) << static_cast<int>(c.op) << " width " << sizeof(T);
    EXPECT_EQ(mem.before, static_cast<T>(0x5A));
    EXPECT_EQ(mem.after, static_cast<T>(0x5A));
  }
}

TEST(AtomicOnWord, EveryOperationAtEveryWidth) {
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 20; ++trial) {
    const std::uint64_t a = rng(), b = rng();
    check_every_op<std::uint8_t>(static_cast<std::uint8_t>(a), static_cast<std::uint8_t>(b),
                                 trial % 2 ? static_cast<std::uint8_t>(a) : 0);
    check_every_op<std::int16_t>(static_cast<std::int16_t>(a), static_cast<std::int16_t>(b),
                                 trial % 2 ? static_cast<std::int16_t>(a) : 0);
    check_every_op<std::uint32_t>(static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(b),
                                  trial % 2 ? static_cast<std::uint32_t>(a) : 0);
    check_every_op<std::int64_t>(static_cast<std::int64_t>(a), static_cast<std::int64_t>(b),
                                 trial % 2 ? static_cast<std::int64_t>(a) : 0);
  }
  std::uint32_t word = 0;
  EXPECT_THROW(atomic_on_word(&word, {AmoOp::kAdd, 3, 1, 0}), std::exception);
}

// One narrow AMO on a lane of a 32-bit word in plain memory, where another PE changes every
// byte outside the lane just before the first compare-and-swap: the swap must fail, be retried,
// and leave the neighbour's change in place.
template <typename T>
void check_narrow(AmoOp op, unsigned at, std::uint32_t start, T operand, T compare) {
  std::uint32_t mem = start;
  const std::uint32_t neighbours = ~(((1u << (8 * sizeof(T))) - 1) << (8 * at));
  int swaps = 0;
  auto cas = [&](std::uint32_t desired, std::uint32_t expected) {
    if (swaps++ == 0) mem ^= neighbours;  // the other PE's store to the neighbouring bytes
    const std::uint32_t held = mem;
    if (held == expected) mem = desired;
    return held;
  };
  T before;
  std::memcpy(&before, reinterpret_cast<const std::byte*>(&start) + at, sizeof(T));
  T after = before;
  bool writes = true;
  switch (op) {
    case AmoOp::kLoad:
      writes = false;
      break;
    case AmoOp::kCompareSwap:
      writes = before == compare;
      if (writes) after = operand;
      break;
    case AmoOp::kStore:
    case AmoOp::kSwap:
      after = operand;
      break;
    case AmoOp::kAdd:
      after = static_cast<T>(before + operand);
      break;
    case AmoOp::kAnd:
      after = static_cast<T>(before & operand);
      break;
    case AmoOp::kOr:
      after = static_cast<T>(before | operand);
      break;
    case AmoOp::kXor:
      after = static_cast<T>(before ^ operand);
      break;
  }
  const std::uint64_t got =
      narrow_atomic(at, {op, static_cast<std::uint8_t>(sizeof(T)), operand, compare}, start, cas);
  const auto what = [&] {
    return ::testing::Message() << "op " << static_cast<int>(op) << " width " << sizeof(T) << " at "
                                << at << " word " << std::hex << start;
  };
  EXPECT_EQ(got, before) << what();
  std::uint32_t want = writes ? start ^ neighbours : start;
  std::memcpy(reinterpret_cast<std::byte*>(&want) + at, &after, sizeof(T));
  EXPECT_EQ(mem, want) << what();
  EXPECT_EQ(swaps, writes ? 2 : 0) << what();
}

TEST(NarrowAtomic, EveryOperationOnEveryLaneKeepsTheNeighboursOfTheWord) {
  std::mt19937_64 rng(std::random_device{}());
  const AmoOp ops[] = {AmoOp::kLoad, AmoOp::kStore, AmoOp::kSwap, AmoOp::kCompareSwap,
                       AmoOp::kAdd,  AmoOp::kAnd,   AmoOp::kOr,   AmoOp::kXor};
  for (int trial = 0; trial < 50; ++trial) {
    const auto start = static_cast<std::uint32_t>(rng());
    const std::uint64_t operand = rng();
    for (const AmoOp op : ops) {
      for (unsigned at = 0; at < 4; ++at) {
        std::uint8_t lane8;
        std::memcpy(&lane8, reinterpret_cast<const std::byte*>(&start) + at, 1);
        // The compare matches the lane every other trial, so a swap both happens and fails.
        check_narrow<std::uint8_t>(op, at, start, static_cast<std::uint8_t>(operand),
                                   trial % 2 ? lane8 : static_cast<std::uint8_t>(lane8 + 1));
        if (at % 2 != 0) continue;
        std::uint16_t lane16;
        std::memcpy(&lane16, reinterpret_cast<const std::byte*>(&start) + at, 2);
        check_narrow<std::uint16_t>(op, at, start, static_cast<std::uint16_t>(operand),
                                    trial % 2 ? lane16 : static_cast<std::uint16_t>(lane16 + 1));
      }
    }
  }
}

}  // namespace
}  // namespace shmoe::transport
