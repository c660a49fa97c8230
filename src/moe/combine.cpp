// combine: every expert PE sends each row of its experts' outputs back to the token's home PE,
// into slot (token * topk + slot) of that PE's combine window; the home PE then sums the top-k
// rows of each token (see combine_reduce.hpp).
//
// Protocol of call g (vector workers; worker 0 runs the control steps):
//  0. each PE checks its own inputs before anything moves.
//  1. entry: each PE tells every PE its verdict and its caller's mode (Agreement), which also
//     says that its combine window is free again, and waits for everyone's; only then may rows
//     be written into a peer's window. If any PE refused, or the modes differ, every PE stops
//     here and throws.
//  2. payload: workers put rows (big segments via the copy engine with the double plane), fence,
//     barrier; worker 0 quiets the engine and raises combine-done g at every PE.
//  3. reduce: wait for combine-done g from every PE, then each worker reduces its tokens.
// When every PE passes where its last dispatch's rows landed (its receive window or receive
// block; the experts wrote their outputs over the dispatched rows in place), or its receive
// window with its outputs staged there in the dispatch's layout, as expand_x, and every PE's is
// mapped here, there is nothing to send: after step 1 each PE's reduction reads its tokens'
// rows where they lie at the experts' PEs, and combine-done g then says that no PE reads them
// any more. Each PE says before step 1 whether it can and where (combine-pulls flag, fenced
// before its verdict), so all agree.
// Shrink mode always reads rows where they lie, at the fixed slots of the last dispatch (a
// caller's rows in expand_x's layout are first copied there; a window on another host is read by
// gets given up on at a quarter of the bound, which mask that PE for the call), so a masked PE
// never writes into a live PE's memory; steps 1 and 3 skip masked PEs and
// mask those that miss the bound, and a token's slots whose expert's PE is masked by step 1 are
// left out of its sum.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <shmem.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "common/backoff.hpp"
#include "common/pe_loss.hpp"
#include "moe/combine_reduce.hpp"
#include "moe/context_state.hpp"
#include "moe/remote_words.hpp"
#include "moe/test_stop.hpp"
#include "shmem/detached_get.hpp"

namespace shmoe::moe {
namespace {

using Clock = std::chrono::steady_clock;

std::string shrink_refusal(const MoeBuffer::State& s, const CombineArgs& in);

// Whether this combine's routing is the last successful dispatch's, whose rows the receive
// windows hold (what reading rows where they lie needs).
bool repeats_last_dispatch(const MoeBuffer::State& s, const CombineArgs& in) {
  const std::size_t pairs = static_cast<std::size_t>(in.bs) * s.cfg.topk;
  return s.dispatched && s.dispatched_ids.size() == pairs &&
         (pairs == 0 ||
          std::equal(s.dispatched_ids.begin(), s.dispatched_ids.end(), in.expert_ids));
}

// What is wrong with this PE's inputs, or "" (then every row can be sent as it stands).
std::string refusal(const MoeBuffer::State& s, const CombineArgs& in) {
  const auto& c = s.cfg;
  const int P = s.n_pes, L = c.experts_per_pe;
  if (in.caller_refused) {
    return fmt::format("combine: PE {}: the caller refused its inputs (its own error says why)",
                       s.me);
  }
  if (in.bs < 0 || in.bs > c.max_bs) {
    return fmt::format(
        "combine: PE {}: num_tokens={} is out of range (0..{}, the buffer's max_tokens_per_pe)",
        s.me, in.bs, c.max_bs);
  }
  const char* null = in.assist_info == nullptr     ? "src_info"
                     : in.ep_recv_count == nullptr ? "layout_prefix"
                     : in.bs == 0                  ? nullptr
                     : in.expert_ids == nullptr    ? "topk_idx"
                     : in.expert_scales == nullptr ? "topk_weights"
                     : in.x_out == nullptr         ? "combined_x"
                                                   : nullptr;
  if (null != nullptr)
    return fmt::format("combine: PE {}: required tensor '{}' is null", s.me, null);
  std::int32_t prev = 0;
  for (int b = 0; b < L * P; ++b) {
    const std::int32_t end = in.ep_recv_count[b];
    if (end < prev || static_cast<std::size_t>(end) > s.recv_cap) {
      return fmt::format(
          "combine: PE {}: layout_prefix[{}]={} is out of range ({}..{}: the counts are "
          "cumulative, up to the rows the window holds)",
          s.me, b, end, prev, s.recv_cap);
    }
    prev = end;
  }
  if (prev > 0 && in.expand_x == nullptr) {
    return fmt::format("combine: PE {}: required tensor 'x' is null ({} rows to send)", s.me, prev);
  }
  // Shrink mode reads no assist_info (the rows' places come from the dispatch), which may be in
  // the fixed-slot layout.
  for (std::int32_t r = 0; r < prev && !s.shrink(); ++r) {
    const std::int32_t* a = in.assist_info + 3 * static_cast<std::size_t>(r);
    if (a[0] < 0 || a[0] >= P || a[1] < 0 || a[1] >= c.max_bs || a[2] < 0 || a[2] >= c.topk) {
      return fmt::format(
          "combine: PE {}: src_info[{}] = ({}, {}, {}) is out of range (source 0..{}, token "
          "0..{}, slot 0..{})",
          s.me, r, a[0], a[1], a[2], P - 1, c.max_bs - 1, c.topk - 1);
    }
  }
  if (s.shrink()) return shrink_refusal(s, in);
  return "";
}

// Shrink mode reads every row where it lies (in the experts' windows, at the fixed slots the last
// dispatch used), so the routing must be that dispatch's, and rows given in expand_x's layout
// must fit their slots. Only asked of inputs that passed the common checks.
std::string shrink_refusal(const MoeBuffer::State& s, const CombineArgs& in) {
  const auto& c = s.cfg;
  if (!repeats_last_dispatch(s, in)) {
    return fmt::format(
        "combine: PE {}: in shrink mode combine must repeat the routing (num_tokens, topk_idx) of "
        "the "
        "last dispatch on this buffer",
        s.me);
  }
  if (in.expand_x == s.recv_rows) return "";
  std::int32_t prev = 0;
  for (int b = 0; b < c.experts_per_pe * s.n_pes; ++b) {
    if (in.ep_recv_count[b] - prev > c.max_bs) {
      return fmt::format(
          "combine: PE {}: layout_prefix[{}] - layout_prefix[{}] = {} rows from one source for "
          "one expert, more than max_tokens_per_pe={} (shrink mode's slots)",
          s.me, b, b - 1, in.ep_recv_count[b] - prev, c.max_bs);
    }
    prev = in.ep_recv_count[b];
  }
  return "";
}

// Shrink mode, with expand_x in dispatch's layout: rows [r0, r1) copied to their fixed slots in
// this PE's receive window, where the tokens' home PEs read them.
void rows_to_fixed_slots(const MoeBuffer::State& s, const CombineArgs& in, std::size_t r0,
                         std::size_t r1) {
  const int P = s.n_pes;
  std::size_t block = 0;
  for (std::size_t r = r0; r < r1; ++r) {
    while (static_cast<std::size_t>(in.ep_recv_count[block]) <= r) ++block;
    const std::size_t first = block ? static_cast<std::size_t>(in.ep_recv_count[block - 1]) : 0;
    const int e = static_cast<int>(block) / P, src = static_cast<int>(block) % P;
    const std::size_t slot =
        static_cast<std::size_t>(fixed_slot(P, s.cfg.max_bs, e, src)) + (r - first);
    std::memcpy(s.recv_rows + slot * s.row_bytes,
                static_cast<const std::byte*>(in.expand_x) + r * s.row_bytes, s.row_bytes);
  }
}

// A call whose PEs passed different caller_mode values is refused on every PE alike, before any
// row moves: a caller that decides by its mode what follows the call never diverges.
std::string modes_differ(const std::vector<int>& modes, int me) {
  for (std::size_t pe = 0; pe < modes.size(); ++pe) {
    if (modes[pe] != modes[static_cast<std::size_t>(me)]) {
      return fmt::format("combine: PEs disagree on caller_mode: PE {} passed {}, PE {} passed {}",
                         pe, modes[pe], me, modes[static_cast<std::size_t>(me)]);
    }
  }
  return "";
}

std::string refused_elsewhere(const std::vector<int>& refusing) {
  return fmt::format(
      "combine: refused on every PE because {} {} {} inputs (its own error says why)",
      refusing.size() == 1 ? "PE" : "PEs", fmt::join(refusing, ", "),
      refusing.size() == 1 ? "refused its" : "refused their");
}

// A PE's combine-pulls flag for call g: 2g + where its rows are read (kPullLanded: where its
// last dispatch's rows landed; kPullWindow: its receive window), or 0 where it cannot pull.
constexpr std::uint64_t kPullLanded = 0, kPullWindow = 1;

// This PE's combine-pulls flag for call g: its part allows reading rows in place when its
// experts' outputs are where the last dispatch's rows landed (the receive window or a packed
// receive block) or staged in its receive window in that layout (a block may hold other rows:
// the caller's, or a layout per expert), that dispatch's routing is this call's, and every PE's
// windows and blocks are mapped here. Only asked of inputs that passed refusal().
std::uint64_t pull_flag(const MoeBuffer::State& s, const CombineArgs& in, std::uint64_t g) {
  const auto unmapped = [](const std::byte* p) { return p == nullptr; };
  if (!repeats_last_dispatch(s, in) ||
      std::any_of(s.peer_landed.begin(), s.peer_landed.end(), unmapped) ||
      std::any_of(s.peer_recv_rows.begin(), s.peer_recv_rows.end(), unmapped)) {
    return 0;
  }
  const bool packed = s.cfg.recv_block_expert_rows == 0 || s.landed == s.recv_rows;
  if (packed && in.expand_x == s.landed) return 2 * g + kPullLanded;
  return in.expand_x == s.recv_rows ? 2 * g + kPullWindow : 0;
}

// One combine call: the state it carries between its phases, a method per phase, and the
// barriers between them in operator(), which each vector worker runs. Rows either are pulled
// from the experts' windows where every PE allows it (pull_flag), or pushed to their tokens' PEs.
class CombineCall {
 public:
  CombineCall(MoeBuffer::State& s, const CombineArgs& in, bool double_plane)
      : s_(s),
        c_(s.cfg),
        in_(in),
        double_plane_(double_plane),
        mask_error_(checked_mask(s, in)),
        live_(s.live_set(in.pe_mask)),
        // A refusal is not thrown here: the peers, which did join the call, learn it at the
        // entry step, so that every PE refuses the call at once.
        mine_(mask_error_.empty() ? refusal(s, in) : mask_error_),
        g_(++s.combine_generation),
        rows_(mine_.empty() ? static_cast<std::size_t>(in.ep_recv_count[L() * s.n_pes - 1]) : 0),
        pull_here_(mine_.empty() ? pull_flag(s, in, g_) : 0),
        waits_(s.n_pes),
        missed_in_reads_(static_cast<std::size_t>(s.n_pes)),
        fetches_(static_cast<std::size_t>(s.cfg.workers.vector)) {
    s_.timing = OpTiming{};
  }

  void operator()(kernel::KernelContext& w) {
    const int id = w.kind_id(), nw = w.kind_count();
    const auto t0 = Clock::now();
    if (s_.shrink() && mine_.empty() && in_.expand_x != s_.recv_rows) {
      rows_to_fixed_slots(s_, in_, rows_ * id / nw, rows_ * (id + 1) / nw);
      shmem_pe_quiet(&s_.me, 1);  // this PE's stores only: no wait for a PE on another host
      w.barrier();
    }
    if (id == 0) enter();
    w.barrier();
    if (!refusing_.empty() || !mode_error_.empty()) return;
    if (pull_) {
      fetch_rows(id, nw);
      if (s_.shrink()) w.barrier();  // a PE given up on by any worker is left out by all
      reduce_pulled(id, nw);
      w.barrier();
      if (id == 0) wait_for_readers(t0);
      return;
    }
    push_rows(id, nw);
    w.barrier();
    if (id == 0) wait_for_rows(t0);
    w.barrier();
    // Reduce this worker's tokens: fp32, slots in increasing order.
    const auto [first, last] = my_tokens(id, nw);
    reduce_weighted_rows({c_.dtype, c_.hidden, c_.topk, s_.combine_rows, s_.row_bytes,
                          in_.expert_ids, in_.expert_scales, in_.x_out, nullptr, in_.x_out_float32},
                         first, last);
  }

  // After the launch: the refusal, if any, on every PE alike; else the call's timing.
  void finish() {
    if (!mine_.empty()) throw Refused(mine_);
    if (!refusing_.empty()) throw Refused(refused_elsewhere(refusing_));
    if (!mode_error_.empty()) throw Refused(mode_error_);
    if (!read_error_.empty()) throw Refused(read_error_);
    for (int i = 0; i < c_.workers.vector; ++i)
      s_.timing.worker_us.push_back(s_.pool->last_worker_seconds()[i] * 1e6);
    s_.timing.comm_us = comm_us_;
    s_.timing.source_wait_us = waits_.us();
    s_.timing.bytes_sent = rows_ * s_.row_bytes;
    for (std::size_t b = 0; b < by_engine_.size(); ++b) {
      if (by_engine_[b]) {
        s_.timing.bytes_via_copy_engine +=
            static_cast<std::size_t>(in_.ep_recv_count[b] - (b ? in_.ep_recv_count[b - 1] : 0)) *
            s_.row_bytes;
      }
    }
  }

 private:
  // A pe_mask where none belongs (shrink mode off) is refused on every PE like any input; in
  // shrink mode a PE without a usable mask cannot take part: it throws at once (before the call
  // takes a generation), and the others mask it at their bound.
  static std::string checked_mask(MoeBuffer::State& s, const CombineArgs& in) {
    std::string error = s.check_mask("combine", in.pe_mask);
    if (!error.empty() && s.shrink()) throw Refused(error);
    return error;
  }

  int L() const { return c_.experts_per_pe; }

  std::pair<std::size_t, std::size_t> my_tokens(int id, int nw) const {
    const auto bs = static_cast<std::size_t>(in_.bs);
    return {bs * id / nw, bs * (id + 1) / nw};
  }

  // Worker 0: this PE's pull flag and verdict to every PE, their verdicts and modes back, then
  // whether every PE pulls, and otherwise which blocks go to the copy engine.
  void enter() {
    const int P = s_.n_pes;
    if (!s_.shrink()) {  // (shrink mode always pulls, and fences nothing: see dispatch.cpp)
      for (int pe = 0; pe < P; ++pe) s_.combine_pulls.raise(pe, s_.me, pull_here_);
      shmem_fence();  // every PE that sees this PE's verdict for call g sees its pull flag too
    }
    refusing_ = s_.combine_entry.agree(g_, s_.me, !mine_.empty(), "combine entry", in_.caller_mode,
                                       &modes_, &waits_, live_);
    if (refusing_.empty()) mode_error_ = modes_differ(modes_, s_.me);
    // A PE can enter call g+1 (and move its pull flag) only after this PE has raised
    // combine-done g, so the flags read here are call g's. Shrink mode always pulls.
    pull_ = refusing_.empty() && mode_error_.empty();
    read_at_ = s_.peer_landed;
    for (int src = 0; pull_ && !s_.shrink() && src < P; ++src) {
      const std::uint64_t flag = std::atomic_ref<std::uint64_t>(*s_.combine_pulls.slot(src))
                                     .load(std::memory_order_acquire);
      pull_ = flag / 2 == g_;
      if (flag % 2 == kPullWindow) read_at_[static_cast<std::size_t>(src)] = s_.peer_recv_rows[src];
    }
    if (pull_) row_at_.resize(static_cast<std::size_t>(in_.bs) * c_.topk);
    if (pull_ && s_.shrink()) keep_live_experts();
    if (double_plane_ && refusing_.empty() && mode_error_.empty() && !pull_) plan_engine();
  }

  // Shrink mode: the slots whose expert's PE is masked by now (or was at the dispatch) are left
  // out of the sum.
  void keep_live_experts() {
    kept_ids_.assign(in_.expert_ids, in_.expert_ids + row_at_.size());
    for (std::size_t i = 0; i < kept_ids_.size(); ++i) {
      if (kept_ids_[i] >= 0 && (s_.plan.positions[i] < 0 || !live_.live(kept_ids_[i] / L())))
        kept_ids_[i] = -1;
    }
  }

  void plan_engine() {
    std::vector<std::size_t> seg(static_cast<std::size_t>(L()) * s_.n_pes);
    std::int32_t prev = 0;
    for (std::size_t b = 0; b < seg.size(); ++b) {
      seg[b] = static_cast<std::size_t>(in_.ep_recv_count[b] - prev) * s_.row_bytes;
      prev = in_.ep_recv_count[b];
    }
    by_engine_ = segments_for_copy_engine(seg, c_.doubleplane_threshold);
  }

  // Pull: this worker's tokens, each slot's row read where its expert's PE holds it: in place
  // where that PE's rows landed, if mapped here; from a PE on another host (shrink mode only, so
  // from its window: shrink mode has no receive blocks), by a detached get (land_fetches).
  void fetch_rows(int id, int nw) {
    const auto [first, last] = my_tokens(id, nw);
    const std::int32_t* ids = kept_ids_.empty() ? in_.expert_ids : kept_ids_.data();
    auto& fetches = fetches_[static_cast<std::size_t>(id)];
    // A get from a PE lost meanwhile (SHMOE_PE_LOSS=continue) fails: its rows are left out.
    const shmoe::LostPesHandledHere lost_rows_left_out(s_.shrink());
    for (std::size_t i = first * c_.topk; i < last * c_.topk; ++i) {
      const std::int64_t pos = s_.plan.positions[i];
      row_at_[i] = nullptr;
      if (pos < 0 || ids[i] < 0) continue;
      const int pe = ids[i] / L();
      const std::size_t at = static_cast<std::size_t>(pos) * s_.row_bytes;
      if (read_at_[pe] != nullptr) {
        row_at_[i] = read_at_[pe] + at;
        continue;
      }
      fetches.push_back({i, pe, shmoe::getmem_detached(s_.recv_rows + at, s_.row_bytes, pe)});
    }
    if (!fetches.empty()) land_fetches(fetches);
  }

  // The sums of this worker's tokens, without the slots of a PE whose gets some worker gave up
  // on (masked for the call: none of its experts' rows count); then the fetches' buffers go.
  void reduce_pulled(int id, int nw) {
    const auto [first, last] = my_tokens(id, nw);
    for (std::size_t i = first * c_.topk; i < last * c_.topk && !kept_ids_.empty(); ++i) {
      const int e = kept_ids_[i];
      if (e >= 0 && missed_in_reads_[static_cast<std::size_t>(e / L())].load() != 0)
        kept_ids_[i] = -1;
    }
    const std::int32_t* ids = kept_ids_.empty() ? in_.expert_ids : kept_ids_.data();
    auto reduce = [&](std::size_t t0, std::size_t t1) {
      reduce_weighted_rows({c_.dtype, c_.hidden, c_.topk, nullptr, s_.row_bytes, ids,
                            in_.expert_scales, in_.x_out, row_at_.data(), in_.x_out_float32},
                           t0, t1);
    };
    std::size_t from = first;
    if (first == 0 && first < last && test_stop_armed(s_.me, "combine_reads")) {  // mid-read
      reduce(first, ++from);
      test_stop_point(s_.me, "combine_reads");
    }
    reduce(from, last);
    fetches_[static_cast<std::size_t>(id)].clear();
  }

  struct Fetch {
    std::size_t slot;
    int pe;
    std::unique_ptr<transport::DetachedGet> get;
  };

  // Waits for this worker's gets up to a quarter of the bound, so that a PE held here is late to
  // the others' next wait by that at most. A PE whose get failed (lost) or is still in flight
  // (stopped on another host: it answers nothing until it resumes) is masked for this call
  // (wait_for_readers), its slots left out of the sum; a get given up on lands, if ever, in a
  // buffer of its own (DetachedGet).
  void land_fetches(std::vector<Fetch>& fetches) {
    using State = transport::DetachedGet::State;
    auto in_flight = [](const Fetch& f) { return f.get->state() == State::kInFlight; };
    auto wait_until = [&](Clock::time_point deadline) {
      shmoe::wait_until(
          [&] {
            live_.beat();  // held here, not stopped
            return std::none_of(fetches.begin(), fetches.end(), in_flight) ||
                   Clock::now() >= deadline;
          },
          [&] {
            return shmoe::WaitState{"combine gets",
                                    fmt::format("combine #{}: gets of rows from other hosts", g_),
                                    -1,
                                    0,
                                    0,
                                    g_};
          });
    };
    const auto deadline = Clock::now() + live_.bound() / 4;
    wait_until(deadline);
    // Far past the deadline, this PE was stalled itself (stopped): the answers may have waited
    // for its own progress, so the peers get a fresh quarter bound.
    if (Clock::now() - deadline > live_.bound() / 8) wait_until(Clock::now() + live_.bound() / 4);
    for (const Fetch& f : fetches) {
      const State state = f.get->state();
      if (state == State::kDone) {
        row_at_[f.slot] = f.get->data();
        continue;
      }
      missed_in_reads_[static_cast<std::size_t>(f.pe)].store(
          state == State::kFailed ? kGetFailed : kGetUnanswered, std::memory_order_relaxed);
    }
  }

  // Pull: no PE may overwrite its window (the next dispatch) before every reader is done.
  void wait_for_readers(Clock::time_point t0) {
    for (int pe = 0; pe < s_.n_pes; ++pe) {
      const int missed = missed_in_reads_[static_cast<std::size_t>(pe)].load();
      if (missed == 0 || !live_.live(pe)) continue;
      live_.mask(pe, "combine gets", g_,
                 missed == kGetFailed
                     ? "a get of its rows failed (lost?) while this PE read them"
                     : fmt::format("it answered no get of its rows within {} ms (stopped?)",
                                   live_.bound().count() / 4));
      // It may be a reader stalled in this call too: told, as a late reader is, and let past
      // its wait for this PE once the telling has landed (a held flag).
      tell_read_mask(pe);
      s_.combine_done.raise_after(pe, s_.me, g_);
    }
    s_.combine_done.all_reach(s_.me, g_, "combine reads", &waits_, s_.late_set(live_));
    s_.keep_only_late(live_);
    if (s_.shrink()) tell_and_learn_read_masks(Clock::now() - t0 > live_.bound() / 2);
    comm_us_ = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }

  // Shrink mode: a reader late past the bound is masked, and the PEs whose windows it read go
  // on to their next calls; each tells it so (read_masks, call g). A PE that learns it was
  // masked while it read cannot prove its rows were still call g's: the call fails on it, and
  // its mask takes in those PEs, as theirs now leave it out.
  // `slow`: this call took over half the bound, so this PE may have been late past it.
  void tell_and_learn_read_masks(bool slow) {
    for (int pe = 0; pe < s_.n_pes; ++pe) {
      if (pe != s_.me && live_.live(pe) && !s_.late_mask.empty() &&
          s_.late_mask[static_cast<std::size_t>(pe)] != 0) {
        tell_read_mask(pe);
      }
    }
    const std::vector<bool> recorded = slow ? read_masks_recorded() : std::vector<bool>{};
    std::vector<int> masked_me;
    for (int src = 0; src < s_.n_pes; ++src) {
      if ((std::atomic_ref<std::uint64_t>(*s_.read_masks.slot(src))
                   .load(std::memory_order_acquire) >= g_ ||
           (!recorded.empty() && recorded[static_cast<std::size_t>(src)])) &&
          live_.live(src)) {
        masked_me.push_back(src);
        live_.mask(src, "combine reads", g_, "it masked this PE, late past the bound in its reads");
      }
    }
    if (masked_me.empty()) return;
    read_error_ = fmt::format(
        "combine: PE {}: call {}: PEs {} masked this PE while it read their windows (it was late "
        "past shrink_timeout_ms={}), so this call's result is not certain; pe_mask now leaves "
        "them out (rejoin to take them back)",
        s_.me, g_, fmt::join(masked_me, ","), c_.shrink_timeout_ms);
  }

  // Tells PE `pe` that this PE ended call g's reads of its window without it: at `pe`, and in
  // this PE's own record, before it goes on to a call that may overwrite what `pe` read.
  void tell_read_mask(int pe) {
    std::atomic_ref<std::uint64_t>(*s_.read_masked.slot(pe)).store(g_, std::memory_order_release);
    s_.read_masks.raise(pe, s_.me, g_);
  }

  // For a slow call, by PE on another host that was not late itself: whether its own record
  // says it ended this call's reads without this PE (or it answered no get of it within a
  // quarter of the bound: not provably not). Read after this PE's own gets completed, so an
  // answer of "no" came while that PE had not gone on past call g: what this PE read was still
  // call g's. (Its flag at this PE, read_masks, may land after this check across hosts.)
  std::vector<bool> read_masks_recorded() {
    std::vector<bool> ask(static_cast<std::size_t>(s_.n_pes), false);
    for (int src = 0; src < s_.n_pes; ++src) {
      const bool late = !s_.late_mask.empty() && s_.late_mask[static_cast<std::size_t>(src)];
      ask[static_cast<std::size_t>(src)] =
          src != s_.me && live_.live(src) && !late && s_.peer_landed[src] == nullptr;
    }
    const auto records =
        read_remote_words(live_, s_.read_masked.slot(s_.me), ask, "read-mask records");
    std::vector<bool> masked(static_cast<std::size_t>(s_.n_pes), false);
    for (std::size_t src = 0; src < ask.size(); ++src)
      masked[src] = ask[src] && (!records[src] || *records[src] >= g_);
    return masked;
  }

  // Push: this worker's share of the received rows, each to its token's slot at its source PE.
  void push_rows(int id, int nw) {
    const std::size_t r0 = rows_ * id / nw, r1 = rows_ * (id + 1) / nw;
    std::vector<kernel::RemoteCopy> engine_copies;
    std::size_t block = 0;
    for (std::size_t r = r0; r < r1; ++r) {
      while (static_cast<std::size_t>(in_.ep_recv_count[block]) <= r) ++block;
      const std::int32_t src = in_.assist_info[3 * r], t = in_.assist_info[3 * r + 1],
                         k = in_.assist_info[3 * r + 2];
      void* to = s_.combine_rows + (static_cast<std::size_t>(t) * c_.topk + k) * s_.row_bytes;
      const void* row = static_cast<const std::byte*>(in_.expand_x) + r * s_.row_bytes;
      if (!by_engine_.empty() && by_engine_[block]) {
        engine_copies.push_back({to, row, s_.row_bytes, src});
      } else {
        shmem_putmem(to, row, s_.row_bytes, src);
      }
    }
    s_.engine->submit(std::move(engine_copies));
    shmem_quiet();
  }

  void wait_for_rows(Clock::time_point t0) {
    s_.engine->quiet();
    shmem_fence();
    s_.combine_done.all_reach(s_.me, g_, "combine payload", &waits_);
    comm_us_ = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }

  MoeBuffer::State& s_;
  const MoeConfig& c_;
  const CombineArgs& in_;
  const bool double_plane_;
  const std::string mask_error_;
  const LiveSet live_;
  const std::string mine_;  // this PE's refusal of its inputs
  const std::uint64_t g_;
  const std::size_t rows_;         // rows this PE's experts return
  const std::uint64_t pull_here_;  // this PE's combine-pulls flag (pull_flag)
  SourceWaits waits_;
  std::vector<int> refusing_;
  std::vector<int> modes_;  // every PE's caller_mode
  std::string mode_error_;  // they differ: nothing moves, every PE throws
  std::string read_error_;  // shrink mode: PEs masked this one while it read their windows
  bool pull_ = false;
  std::vector<const std::byte*> row_at_;  // with pull: row (t, k) in its expert's window
  std::vector<std::byte*> read_at_;       // with pull: [pe] where its rows are read
  // Shrink mode: the routing the sum uses, with -1 for the slots of masked experts' PEs.
  std::vector<std::int32_t> kept_ids_;
  std::vector<bool> by_engine_;  // per (expert, source) block of expand_x
  double comm_us_ = 0;
  // Shrink mode: by PE, whether a get of this PE's failed (kGetFailed) or went unanswered.
  static constexpr int kGetFailed = 1, kGetUnanswered = 2;
  std::vector<std::atomic<int>> missed_in_reads_;
  std::vector<std::vector<Fetch>> fetches_;  // by worker: their buffers hold rows until summed
};

void run_combine(MoeBuffer& ctx, const CombineArgs& in, bool double_plane) {
  auto& s = ctx.state();
  CombineCall call(s, in, double_plane);
  s.pool->launch({0, s.cfg.workers.vector}, [&call](kernel::KernelContext& w) { call(w); });
  call.finish();
}

}  // namespace

void combine_classic(MoeBuffer& ctx, const CombineArgs& in) {
  run_combine(ctx, in, false);
}
void combine_doubleplane(MoeBuffer& ctx, const CombineArgs& in) {
  run_combine(ctx, in, true);
}

}  // namespace shmoe::moe
