// Shrink mode (elastic expert parallelism) through the public API: PEs that stop calling in the
// middle of MoE traffic are masked by the others within the bound, the survivors' dispatch and
// combine stay exact for the live experts, and a call's mask and refusals behave as documented.
// One PE stops before a dispatch, another after a dispatch (before its combine), which is
// where DeepEP's shrink test fails its ranks. Inputs are fresh random on every run; every
// expectation is computed here from the seed and the expected mask, independently of the
// operators.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
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

constexpr int kL = 2, kTopk = 2, kHidden = 48, kMaxBs = 10, kRounds = 4;

// The bound: long enough that no live PE, however the scheduler treats it on loaded cores, is
// masked by mistake (SHMOE_TEST_SHRINK_MS, default 2000).
int bound_ms() {
  const char* v = std::getenv("SHMOE_TEST_SHRINK_MS");
  return v != nullptr ? std::atoi(v) : 2000;
}

MoeConfig config(int shrink_ms) {
  MoeConfig c;
  c.num_experts_per_pe = kL;
  c.max_tokens_per_pe = kMaxBs;
  c.hidden = kHidden;
  c.num_topk = kTopk;
  c.dtype = SHMOE_DTYPE_BFLOAT16;
  c.vector_workers = 2;
  c.shrink_timeout_ms = shrink_ms;
  return c;
}

// PE src's tokens in round `round`, a function of (seed, round, src) alone: distinct experts per
// token (some slots dropped), power-of-two weights, rows of k / 8 with |k| < 128, so that every
// sum below is exact in fp32 and in bf16.
struct Inputs {
  int bs = 0;
  std::vector<std::uint16_t> x;
  std::vector<std::int32_t> ids;
  std::vector<float> weights;
};

Inputs inputs_of(std::uint64_t seed, int round, int src, int n_pes) {
  const int E = n_pes * kL;
  const std::uint64_t base = seed ^ (std::uint64_t(round) << 40) ^ (std::uint64_t(src) << 20);
  Inputs in;
  in.bs = 1 + static_cast<int>(test::mix(base) % kMaxBs);
  for (int t = 0; t < in.bs; ++t) {
    const std::uint64_t h = test::mix(base ^ (t + 1));
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
  }
  return in;
}

// The "expert": expert e doubles its rows when e is odd (exact in bf16).
float expert_factor(int e) {
  return e % 2 ? 2.0f : 1.0f;
}

std::set<int> masked_set(const std::vector<std::int32_t>& mask) {
  std::set<int> s;
  for (std::size_t pe = 0; pe < mask.size(); ++pe) {
    if (mask[pe] != 0) s.insert(static_cast<int>(pe));
  }
  return s;
}

struct Received {
  std::vector<std::uint16_t> x;
  std::vector<std::int32_t> assist, recv, nums;
  explicit Received(std::size_t cap, int n)
      : x(cap * kHidden, 0xFFFF),
        assist(cap * 3, -7),
        recv(static_cast<std::size_t>(n) * kL, -7),
        nums(kL, -7) {}
};

// The rows PE `me` must hold after a dispatch whose live sources are those outside `masked`:
// grouped by local expert, then source PE, then token order.
void check_dispatch(int rows, const Received& r, const std::vector<Inputs>& all,
                    const std::set<int>& masked, int me, int n) {
  int row = 0;
  for (int e = 0; e < kL; ++e) {
    for (int src = 0; src < n; ++src) {
      if (masked.count(src) == 0) {
        const Inputs& in = all[static_cast<std::size_t>(src)];
        for (int i = 0; i < in.bs * kTopk; ++i) {
          if (in.ids[i] != me * kL + e) continue;
          ASSERT_LT(row, rows) << "too few rows";
          const int t = i / kTopk;
          EXPECT_EQ(r.assist[3 * row], src) << "row " << row;
          EXPECT_EQ(r.assist[3 * row + 1], t) << "row " << row;
          EXPECT_EQ(r.assist[3 * row + 2], i % kTopk) << "row " << row;
          EXPECT_EQ(std::memcmp(&r.x[static_cast<std::size_t>(row) * kHidden],
                                &in.x[static_cast<std::size_t>(t) * kHidden], kHidden * 2),
                    0)
              << "row " << row << " (PE " << src << ", token " << t << ")";
          ++row;
        }
      }
      EXPECT_EQ(r.recv[e * n + src], row) << "ep_recv_count of expert " << e << ", PE " << src;
    }
  }
  EXPECT_EQ(rows, row);
}

// The rows this PE's experts return: each received row times its expert's factor. Compact
// (dispatch's layout) or, with `window`, into the receive window's fixed slots.
void run_experts(const Received& r, int rows, int me, int n, std::uint16_t* out, bool window) {
  int row = 0;
  for (int e = 0; e < kL; ++e) {
    for (int src = 0; src < n; ++src) {
      const int end = r.recv[e * n + src];
      for (int j = 0; row < end; ++row, ++j) {
        const std::size_t to = window ? (static_cast<std::size_t>(e) * n + src) * kMaxBs + j
                                      : static_cast<std::size_t>(row);
        for (int c = 0; c < kHidden; ++c) {
          out[to * kHidden + c] =
              bf16_bits(from_bf16(r.x[row * kHidden + c]) * expert_factor(me * kL + e));
        }
      }
    }
  }
  ASSERT_EQ(row, rows);
}

void check_combine(const std::vector<std::uint16_t>& out, const Inputs& in,
                   const std::set<int>& masked) {
  for (int t = 0; t < in.bs; ++t) {
    for (int c = 0; c < kHidden; ++c) {
      double want = 0;
      for (int k = 0; k < kTopk; ++k) {
        const int e = in.ids[t * kTopk + k];
        if (e < 0 || masked.count(e / kL)) continue;
        want += double{in.weights[t * kTopk + k]} * expert_factor(e) *
                from_bf16(in.x[static_cast<std::size_t>(t) * kHidden + c]);
      }
      // The sum is exact in fp32; the operator rounds it once to bf16 (to nearest, ties even).
      ASSERT_EQ(out[static_cast<std::size_t>(t) * kHidden + c],
                round_to_bf16(static_cast<float>(want)))
          << "token " << t << " column " << c;
    }
  }
}

// A dispatch's arguments and outputs, and a combine's, over a test's arrays.
DispatchArgs dispatch_args(const Inputs& in, std::int32_t* pe_mask) {
  DispatchArgs a;
  a.x = in.x.data();
  a.topk_idx = in.ids.data();
  a.topk_weights = in.weights.data();
  a.num_tokens = in.bs;
  a.pe_mask = pe_mask;
  return a;
}

DispatchOutputs dispatch_outputs(void* recv_x, Received& r) {
  DispatchOutputs o;
  o.recv_x = recv_x;
  o.recv_src_info = r.assist.data();
  o.recv_layout_prefix = r.recv.data();
  o.num_recv_tokens_per_expert = r.nums.data();
  return o;
}

CombineArgs combine_args(const void* x, const Received& r, const Inputs& in, void* out,
                         std::int32_t* pe_mask) {
  CombineArgs c;
  c.x = x;
  c.src_info = r.assist.data();
  c.layout_prefix = r.recv.data();
  c.topk_idx = in.ids.data();
  c.topk_weights = in.weights.data();
  c.num_tokens = in.bs;
  c.combined_x = out;
  c.pe_mask = pe_mask;
  return c;
}

// One round's dispatch on this PE, checked against the reference for the mask `expect`, which
// the mask must be after the call.
struct Dispatched {
  Inputs in;
  Received r;
  int rows = 0;
};
Dispatched dispatch_checked(MoeBuffer& op, std::uint64_t seed, int round,
                            std::vector<std::int32_t>& mask, const std::set<int>& expect) {
  const int n = shmem_n_pes(), me = shmem_my_pe();
  std::vector<Inputs> all;
  for (int pe = 0; pe < n; ++pe) all.push_back(inputs_of(seed, round, pe, n));
  Dispatched d{all[static_cast<std::size_t>(me)], Received(op.recv_capacity(), n)};
  d.rows = op.dispatch(dispatch_args(d.in, mask.data()), dispatch_outputs(d.r.x.data(), d.r));
  EXPECT_EQ(masked_set(mask), expect) << "round " << round << " dispatch";
  check_dispatch(d.rows, d.r, all, expect, me, n);
  return d;
}

// Its combine: the experts' rows handed over in dispatch's layout, or (`window`) in the receive
// window's fixed slots.
// `or_else`, when given, is a mask the call may end with instead of `expect`: then checked
// against it.
void combine_checked(MoeBuffer& op, const Dispatched& d, int round, std::vector<std::int32_t>& mask,
                     const std::set<int>& expect, bool window,
                     const std::set<int>* or_else = nullptr) {
  const int n = shmem_n_pes(), me = shmem_my_pe();
  std::vector<std::uint16_t> y(op.recv_capacity() * kHidden, 0);
  auto* rows_out = window ? static_cast<std::uint16_t*>(op.receive_window()) : y.data();
  run_experts(d.r, d.rows, me, n, rows_out, window);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(d.in.bs) * kHidden, 0xFFFF);
  op.combine(combine_args(rows_out, d.r, d.in, out.data(), mask.data()));
  const std::set<int> got = masked_set(mask);
  const std::set<int>& want = or_else != nullptr && got == *or_else ? *or_else : expect;
  EXPECT_EQ(got, want) << "round " << round << " combine";
  check_combine(out, d.in, want);
}

// One round of every live PE: a dispatch and a combine (dispatch's layout), both checked.
void round_checked(MoeBuffer& op, std::uint64_t seed, int round, std::vector<std::int32_t>& mask,
                   const std::set<int>& expect) {
  combine_checked(op, dispatch_checked(op, seed, round, mask, expect), round, mask, expect, false);
}

// PE `stops_at_dispatch` never calls again from round 1's dispatch on; PE `at_combine`
// dispatches in round 2, then never calls again. The others go on, with every call checked.
TEST(MoeShrink, PesThatStopCallingAreMaskedAndTheOthersStayExact) {
  const int n = shmem_n_pes(), me = shmem_my_pe();
  ASSERT_GE(n, 3) << "needs a PE to stop at dispatch, one at combine and a survivor";
  const std::uint64_t seed = test::shared_seed();
  // Two different PEs of 1..n-1 (PE 0 draws the seed).
  const int stops_at_dispatch = 1 + static_cast<int>(seed % (n - 1));
  const int at_combine = stops_at_dispatch % (n - 1) + 1;
  MoeBuffer op(config(bound_ms()));
  std::vector<std::int32_t> mask(static_cast<std::size_t>(n), 0);
  std::set<int> expect;
  for (int round = 0; round < kRounds; ++round) {
    if (me == stops_at_dispatch && round == 1) break;
    if (round == 1) expect.insert(stops_at_dispatch);
    const Dispatched d = dispatch_checked(op, seed, round, mask, expect);
    if (me == at_combine && round == 2) break;
    if (round == 2) expect.insert(at_combine);
    // Even rounds hand the experts' rows over in dispatch's layout, odd ones in the window.
    combine_checked(op, d, round, mask, expect, round % 2 == 1);
    op.sync_live(mask.data());
    EXPECT_EQ(masked_set(mask), expect) << "round " << round << " sync_live";
  }
}

// A PE that misses rounds 1 and 2 (masked by the others in round 1) and comes back: after a
// rejoin of every PE, nobody is masked and round 3 is exact for every expert on every PE, on
// both operators of the layer (the second brought to the same counters by the same rejoin).
TEST(MoeShrink, AMaskedPeRejoinsAndEveryPeIsExactAgain) {
  const int n = shmem_n_pes(), me = shmem_my_pe();
  const std::uint64_t seed = test::shared_seed();
  const int away = 1 + static_cast<int>(seed % (n - 1));
  // Set by PE 0 once it is done with round 2: the absent PE comes back then, as a resumed one
  // would (its own rejoin waits only a bound).
  auto* back = static_cast<long*>(shmem_calloc(1, sizeof(long)));
  {
    MoeBuffer op(config(bound_ms())), second(config(bound_ms()));
    std::vector<std::int32_t> mask(static_cast<std::size_t>(n), 0);
    round_checked(op, seed, 0, mask, {});
    round_checked(second, seed, 10, mask, {});
    if (me == away) {
      shmem_long_wait_until(back, SHMEM_CMP_EQ, 1);
    } else {
      round_checked(op, seed, 1, mask, {away});
      round_checked(second, seed, 11, mask, {away});
      round_checked(op, seed, 2, mask, {away});
      if (me == 0) shmem_long_atomic_set(back, 1, away);
    }
    op.rejoin(mask.data(), {second.handle()});
    EXPECT_EQ(masked_set(mask), std::set<int>{}) << "after the rejoin";
    round_checked(op, seed, 3, mask, {});
    round_checked(second, seed, 13, mask, {});
    op.sync_live(mask.data());
    EXPECT_EQ(masked_set(mask), std::set<int>{});
  }
  shmem_free(back);
}

// Dispatched into the receive window, the rows stay in their fixed slots, with assist_info
// indexed alike; the experts write their outputs there in place, and combine reads them there.
TEST(MoeShrink, RowsStayInTheirSlotsWhenTheWindowIsExpandX) {
  const int n = shmem_n_pes(), me = shmem_my_pe();
  const std::uint64_t seed = test::shared_seed();
  MoeBuffer op(config(bound_ms()));
  std::vector<std::int32_t> mask(static_cast<std::size_t>(n), 0);
  std::vector<Inputs> all;
  for (int pe = 0; pe < n; ++pe) all.push_back(inputs_of(seed, 20, pe, n));
  const Inputs& in = all[static_cast<std::size_t>(me)];
  Received r(op.recv_capacity(), n);
  auto* window = static_cast<std::uint16_t*>(op.receive_window());
  const int rows = op.dispatch(dispatch_args(in, mask.data()), dispatch_outputs(window, r));
  int expected_rows = 0;
  for (int e = 0; e < kL; ++e) {
    for (int src = 0; src < n; ++src) {
      const Inputs& from = all[static_cast<std::size_t>(src)];
      std::size_t slot = (static_cast<std::size_t>(e) * n + src) * kMaxBs;
      for (int i = 0; i < from.bs * kTopk; ++i) {
        if (from.ids[i] != me * kL + e) continue;
        const int t = i / kTopk;
        EXPECT_EQ(r.assist[3 * slot], src) << "slot " << slot;
        EXPECT_EQ(r.assist[3 * slot + 1], t) << "slot " << slot;
        EXPECT_EQ(r.assist[3 * slot + 2], i % kTopk) << "slot " << slot;
        EXPECT_EQ(std::memcmp(&window[slot * kHidden],
                              &from.x[static_cast<std::size_t>(t) * kHidden], kHidden * 2),
                  0)
            << "slot " << slot;
        ++slot;
        ++expected_rows;
      }
      EXPECT_EQ(r.recv[e * n + src], expected_rows) << "ep_recv_count " << e << ", " << src;
    }
  }
  ASSERT_EQ(rows, expected_rows);
  // The experts, in place: each slot's row times its expert's factor.
  for (int e = 0; e < kL; ++e) {
    for (int src = 0; src < n; ++src) {
      const int first = e * n + src == 0 ? 0 : r.recv[e * n + src - 1];
      for (int j = 0; j < r.recv[e * n + src] - first; ++j) {
        std::uint16_t* row =
            &window[((static_cast<std::size_t>(e) * n + src) * kMaxBs + j) * kHidden];
        for (int c = 0; c < kHidden; ++c)
          row[c] = bf16_bits(from_bf16(row[c]) * expert_factor(me * kL + e));
      }
    }
  }
  std::vector<std::uint16_t> out(static_cast<std::size_t>(in.bs) * kHidden, 0xFFFF);
  op.combine(combine_args(window, r, in, out.data(), mask.data()));
  check_combine(out, in, {});
  EXPECT_EQ(masked_set(mask), std::set<int>{});
}

// Refusals that every PE makes alone (nothing moves, so no PE waits for another), and one that
// the header carries to every PE.
TEST(MoeShrink, MasksAndSettingsAreChecked) {
  const int n = shmem_n_pes(), me = shmem_my_pe();
  MoeBuffer op(config(1000));
  Inputs in = inputs_of(test::shared_seed(), 0, me, n);
  Received r(op.recv_capacity(), n);
  EXPECT_EQ(op.recv_capacity(), static_cast<std::size_t>(kL) * n * kMaxBs);
  const DispatchOutputs outs = dispatch_outputs(r.x.data(), r);
  DispatchArgs din = dispatch_args(in, nullptr);
  EXPECT_EQ(error_of([&] { op.dispatch(din, outs); }),
            fmt::format("dispatch: PE {}: shrink mode needs a pe_mask", me));
  std::vector<std::int32_t> mask(static_cast<std::size_t>(n), 0);
  mask[static_cast<std::size_t>(me)] = 3;
  din.pe_mask = mask.data();
  EXPECT_EQ(
      error_of([&] { op.dispatch(din, outs); }),
      fmt::format("dispatch: PE {}: pe_mask[{}]=3 masks this PE itself (0 required)", me, me));
  EXPECT_EQ(
      error_of([&] { op.sync_live(mask.data()); }),
      fmt::format("sync_live: PE {}: pe_mask[{}]=3 masks this PE itself (0 required)", me, me));
  mask[static_cast<std::size_t>(me)] = 0;
  EXPECT_EQ(masked_set(mask), std::set<int>{});
  // combine repeats the last dispatch's routing (none succeeded yet); every PE refuses, and each
  // throws its own reason.
  std::vector<std::uint16_t> out(static_cast<std::size_t>(in.bs) * kHidden);
  const CombineArgs cin = combine_args(r.x.data(), r, in, out.data(), mask.data());
  std::fill(r.recv.begin(), r.recv.end(), 0);
  EXPECT_EQ(error_of([&] { op.combine(cin); }),
            fmt::format("combine: PE {}: in shrink mode combine must repeat the routing "
                        "(num_tokens, topk_idx) of the last dispatch on this buffer",
                        me));
  // Shrink mode off: a pe_mask is refused on every PE, naming the PE that passed one.
  MoeBuffer plain(config(0));
  Received p(plain.recv_capacity(), n);
  const DispatchArgs pin = dispatch_args(in, me == n - 1 ? mask.data() : nullptr);
  const std::string e = error_of([&] { plain.dispatch(pin, dispatch_outputs(p.x.data(), p)); });
  if (me == n - 1) {
    EXPECT_EQ(e, fmt::format("dispatch: PE {}: pe_mask is given, but shrink mode is off "
                             "(shrink_timeout_ms=0)",
                             me));
  } else {
    EXPECT_EQ(e, fmt::format("dispatch: refused on every PE because PE {} refused its inputs "
                             "(its own error says why)",
                             n - 1));
  }
  // A bound the hang report would pre-empt, and a receive capacity that shrink mode sets itself.
  MoeConfig bad = config(600'000);
  EXPECT_EQ(error_of([&] { MoeBuffer b(bad); }),
            "MoeBuffer: shrink_timeout_ms=600000 is out of range (1..29999) (0 for off; below "
            "SHMOE_HANG_TIMEOUT)");
  bad = config(1000);
  bad.max_recv_rows = 5;
  EXPECT_EQ(error_of([&] { MoeBuffer b(bad); }),
            "MoeBuffer: max_recv_rows=5 must be 0 in shrink mode (shrink_timeout_ms > 0), whose "
            "window holds a fixed slot per (local expert, source PE, token)");
}

// SHMOE_TEST_STOP_IN=PE:STEP has the library stop PE (SIGSTOP) inside STEP, at a point where it
// leaves the others half-informed (sync_live, rejoin: its flag raised at the first half of the
// PEs only). The stopped PE, or -1 where the setting does not name `step`.
int stopped_inside(const std::string& step) {
  const char* v = std::getenv("SHMOE_TEST_STOP_IN");
  const std::string text = v != nullptr ? v : "";
  const auto colon = text.find(':');
  if (colon == std::string::npos || text.substr(colon + 1) != step) return -1;
  return std::atoi(text.substr(0, colon).c_str());
}

// Waits (up to 30 s) until process `pid` shows as stopped; all PEs run on this host.
bool shows_stopped(pid_t pid) {
  for (int i = 0; i < 30'000; ++i) {
    std::ifstream stat(fmt::format("/proc/{}/stat", pid));
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');  // the state follows the command name
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'T')
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// The PEs' side of a stop inside the library: each PE but the stopped one says when it is done
// with the step; the resumer (PE 0, or 1) then resumes the stopped PE (SIGCONT), which finishes
// the step, and lets the others go on with it.
class StopDrill {
 public:
  explicit StopDrill(int stopped)
      : n_(shmem_n_pes()), me_(shmem_my_pe()), stopped_(stopped), resumer_(stopped == 0 ? 1 : 0) {
    words_ = static_cast<long*>(shmem_calloc(3, sizeof(long)));  // pid, done, go
    if (me_ == stopped_) shmem_long_atomic_set(&words_[0], static_cast<long>(::getpid()), resumer_);
    shmem_barrier_all();
  }
  ~StopDrill() { shmem_free(words_); }
  StopDrill(const StopDrill&) = delete;
  StopDrill& operator=(const StopDrill&) = delete;

  void done_with_step() {
    if (me_ == stopped_) return;  // it goes on as soon as it is resumed
    shmem_long_atomic_inc(&words_[1], resumer_);
    if (me_ == resumer_) {
      shmem_long_wait_until(&words_[1], SHMEM_CMP_EQ, n_ - 1);
      const auto pid = static_cast<pid_t>(words_[0]);
      EXPECT_TRUE(shows_stopped(pid)) << "PE " << stopped_ << " never stopped inside the step";
      ::kill(pid, SIGCONT);
      for (int pe = 0; pe < n_; ++pe) {
        if (pe != stopped_) shmem_long_atomic_set(&words_[2], 1, pe);
      }
    }
    shmem_long_wait_until(&words_[2], SHMEM_CMP_EQ, 1);
  }

 private:
  int n_, me_, stopped_, resumer_;
  long* words_ = nullptr;
};

// What a step that `stopped` left half-way gives: the PEs it reached (the first half) count it
// live, the others mask it and tell it so; resumed, it counts live exactly those that did.
std::set<int> masked_after_half_arrival(int stopped, int me, int n) {
  const int reached = (n + 1) / 2;
  if (me == stopped) {
    std::set<int> s;
    for (int pe = reached; pe < n; ++pe) {
      if (pe != stopped) s.insert(pe);
    }
    return s;
  }
  return me < reached ? std::set<int>{} : std::set<int>{stopped};
}

// Whether some PE's window is reached by UCX, not mapped here (simulated hosts): the same on
// every PE.
bool spans_hosts(MoeBuffer& op) {
  for (int pe = 0; pe < shmem_n_pes(); ++pe) {
    if (shmem_ptr(op.receive_window(), pe) == nullptr) return true;
  }
  return false;
}

// Every pair of PEs agrees on whether they mask each other, and no PE masks another but the
// stopped one and the stopped one them (collective, every PE running).
void expect_pairs_agree(const std::vector<std::int32_t>& mask, int stopped) {
  const int n = shmem_n_pes(), me = shmem_my_pe();
  auto* rows = static_cast<std::int32_t*>(
      shmem_calloc(static_cast<std::size_t>(n) * n, sizeof(std::int32_t)));
  for (int pe = 0; pe < n; ++pe) shmem_int32_put(rows + me * n, mask.data(), n, pe);
  shmem_barrier_all();
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      EXPECT_EQ(rows[a * n + b] != 0, rows[b * n + a] != 0)
          << "PE " << a << " and PE " << b << " disagree on masking each other";
      if (a != stopped && b != stopped) {
        EXPECT_EQ(rows[a * n + b], 0) << "PE " << a << " masked PE " << b;
      }
    }
  }
  shmem_barrier_all();
  shmem_free(rows);
}

// The later rejoin of every PE: nobody masked, and a round exact for every expert on every PE.
void rejoin_and_check(MoeBuffer& op, std::uint64_t seed, int round,
                      std::vector<std::int32_t>& mask) {
  op.rejoin(mask.data());
  EXPECT_EQ(masked_set(mask), std::set<int>{}) << "after the later rejoin";
  round_checked(op, seed, round, mask, {});
}

// Stopped inside `step` (sync_live or rejoin: `barrier`) after reaching half the PEs: a PE that
// masked it tells it so, and the resumed PE does not take that PE's flag (raised before it gave
// up) for an arrival; the later rejoin (a new attempt, the same on every PE) brings every PE back.
void stopped_inside_barrier(const char* step, void (MoeBuffer::*barrier)(std::int32_t*)) {
  const int stopped = stopped_inside(step);
  if (stopped < 0) GTEST_SKIP() << "runs with SHMOE_TEST_STOP_IN=PE:" << step;
  const int n = shmem_n_pes(), me = shmem_my_pe();
  ASSERT_GE(stopped, (n + 1) / 2) << "the stopped PE must be one that its own flag has not reached";
  const std::uint64_t seed = test::shared_seed();
  StopDrill drill(stopped);
  MoeBuffer op(config(bound_ms()));
  std::vector<std::int32_t> mask(static_cast<std::size_t>(n), 0);
  round_checked(op, seed, 0, mask, {});
  (op.*barrier)(mask.data());
  // Across hosts the stopped PE's flags to the other host go from its own progress, which the
  // stop may freeze before they leave: the PEs it reached may not have seen it. Pairs agree.
  const bool hosts = spans_hosts(op);
  if (!hosts) {
    EXPECT_EQ(masked_set(mask), masked_after_half_arrival(stopped, me, n)) << "after " << step;
  }
  drill.done_with_step();
  if (hosts) expect_pairs_agree(mask, stopped);
  rejoin_and_check(op, seed, 1, mask);
}

TEST(MoeShrinkStopped, InsideSyncLive) {
  stopped_inside_barrier("sync_live", &MoeBuffer::sync_live);
}

TEST(MoeShrinkStopped, InsideRejoin) {
  stopped_inside_barrier("rejoin",
                         static_cast<void (MoeBuffer::*)(std::int32_t*)>(&MoeBuffer::rejoin));
}

// Stopped in the middle of its combine's reads past the bound: the others mask it and go on
// (one more round without it); resumed, its combine fails, naming them, and its mask leaves
// them out. Then every PE rejoins.
TEST(MoeShrinkStopped, InsideCombineReads) {
  const int stopped = stopped_inside("combine_reads");
  if (stopped < 0) GTEST_SKIP() << "runs with SHMOE_TEST_STOP_IN=PE:combine_reads";
  const int n = shmem_n_pes(), me = shmem_my_pe();
  const std::uint64_t seed = test::shared_seed();
  StopDrill drill(stopped);
  MoeBuffer op(config(bound_ms()));
  std::vector<std::int32_t> mask(static_cast<std::size_t>(n), 0);
  const Dispatched d = dispatch_checked(op, seed, 0, mask, {});
  std::set<int> others;
  for (int pe = 0; pe < n; ++pe) {
    if (pe != stopped) others.insert(pe);
  }
  if (me == stopped) {
    std::vector<std::uint16_t> y(op.recv_capacity() * kHidden, 0);
    run_experts(d.r, d.rows, me, n, y.data(), false);
    std::vector<std::uint16_t> out(static_cast<std::size_t>(d.in.bs) * kHidden, 0xFFFF);
    const std::string e =
        error_of([&] { op.combine(combine_args(y.data(), d.r, d.in, out.data(), mask.data())); });
    EXPECT_NE(e.find(fmt::format("combine: PE {}: call 1: PEs {} masked this PE while it read "
                                 "their windows",
                                 me, fmt::join(others, ","))),
              std::string::npos)
        << e;
    EXPECT_EQ(masked_set(mask), others) << "after the failed combine";
  } else {
    // The combine waited for the stopped reader only up to the bound: its rows were all read,
    // or, from another host, given up on at a quarter of the bound (masked for this call).
    const std::set<int> gave_up{stopped};
    combine_checked(op, d, 0, mask, {}, false, spans_hosts(op) ? &gave_up : nullptr);
    round_checked(op, seed, 1, mask, {stopped});
  }
  drill.done_with_step();
  rejoin_and_check(op, seed, 2, mask);
}

}  // namespace
}  // namespace shmoe
