// dispatch: every PE sends each (token, top-k slot) row to the PE owning that expert, straight
// into its final place in the receiver's expand_x layout (grouped by local expert, then source
// PE, then token order).
//
// Protocol of call g (vector workers only; worker 0 runs the control steps):
//  1. header: each PE puts its CallHeader (counts per destination and expert, parameters, input
//     errors or the caller's verdict, then the caller's header ints) into every PE's header row
//     (parity g % 2), then raises header flag g there.
//  2. plan: once every header is in, each PE knows every count, so it computes where each of its
//     rows lands at each destination and checks every destination's capacity (same verdict on
//     every PE). A caller's kRetry verdict ends the call here on every PE, with nothing moved. A PE
//     only writes rows after every PE's header of call g arrived, i.e. after every receiver has
//     finished with its window for call g-1.
//  3. payload: workers put rows, and each row's side-band (its RowMeta, then the caller's token
//     side data) in one put; with the double plane, big segments go to the copy engine. Each
//     worker fences its stores; after a worker barrier and the engine's quiet, worker 0 raises
//     dispatch-done g at every PE.
//  4. receive: wait for dispatch-done g from every PE, then copy rows out to the caller, unless
//     the caller reads them where they landed (expand_x is the receive window), or they landed
//     in a receive block that the call takes for the caller (recv_blocks.hpp; the receiver names
//     the block in its header of step 1, and the senders of step 3 write there; with
//     recv_block_expert_rows, each expert's rows from the start of its run there).
// Shrink mode (protocol.hpp's LiveSet): steps 1 and 3 neither send to nor wait for masked PEs and
// mask those that miss the bound; rows land in fixed slots (route_plan.hpp's plan_fixed_slots),
// and step 4 compacts the live sources' rows into expand_x, or leaves them in their slots when
// expand_x is the receive window.
#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/streaming_copy.hpp"
#include "moe/context_state.hpp"

namespace shmoe::moe {
namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// `block`: the receive block taken for this call, or -1.
CallHeader make_header(const MoeBuffer::State& s, const DispatchArgs& in,
                       const DispatchOutputs& out, std::int32_t* counts, int block) {
  const auto& c = s.cfg;
  CallHeader h;
  h.hidden = c.hidden;
  h.topk = c.topk;
  h.experts_per_pe = c.experts_per_pe;
  h.dtype = static_cast<std::int32_t>(c.dtype);
  h.bs = in.bs;
  if (in.verdict != CallVerdict::kProceed) {
    h.error =
        in.verdict == CallVerdict::kRefuse ? InputError::kCallerRefused : InputError::kCallerRetry;
    return h;
  }
  const bool inputs_missing = in.bs > 0 && (in.x == nullptr || in.expert_ids == nullptr);
  fill_route_header(h, counts, inputs_missing ? nullptr : in.expert_ids, inputs_missing ? 0 : in.bs,
                    c.max_bs, c.topk, s.experts());
  if (h.error != InputError::kNone) return h;
  h.recv_block = block;
  if (inputs_missing) {
    refuse_null(h, in.x == nullptr ? Tensor::kX : Tensor::kExpertIds);
  } else if (out.recv_block != nullptr && (out.expand_x != nullptr || block < 0)) {
    h.error = InputError::kRecvBlock;
    const RecvBlockError why = out.expand_x != nullptr ? RecvBlockError::kRecvXToo
                               : s.blocks.count() == 0 ? RecvBlockError::kNoBlocks
                                                       : RecvBlockError::kAllHeld;
    h.error_index[0] = static_cast<std::int32_t>(why);
    h.error_index[1] = s.blocks.count();
  } else if (out.recv_block != nullptr && out.recv_block_x == nullptr) {
    refuse_null(h, Tensor::kRecvBlockX);
  } else if (out.recv_block == nullptr && out.expand_x == nullptr) {
    refuse_null(h, Tensor::kExpandX);
  } else if (out.assist_info == nullptr) {
    refuse_null(h, Tensor::kAssistInfo);
  } else if (out.ep_recv_count == nullptr) {
    refuse_null(h, Tensor::kEpRecvCount);
  } else if (out.expert_token_nums == nullptr) {
    refuse_null(h, Tensor::kExpertTokenNums);
  } else if (c.token_side_bytes > 0 && in.bs > 0 && in.token_side == nullptr) {
    refuse_null(h, Tensor::kTokenSide);
  } else if (c.header_ints > 0 && in.header_ints == nullptr) {
    refuse_null(h, Tensor::kHeaderInts);
  }
  return h;
}

// Where each receiver's rows of this call go: its receive window, or the receive block its
// header names.
void note_destinations(MoeBuffer::State& s, const std::vector<const CallHeader*>& headers) {
  for (int pe = 0; pe < s.n_pes; ++pe) {
    const auto p = static_cast<std::size_t>(pe);
    const int b = headers[p] == nullptr ? -1 : headers[p]->recv_block;
    s.dest_rows[p] = b < 0 ? s.recv_rows : s.blocks.rows(b);
    s.peer_landed[p] = b < 0 ? s.peer_recv_rows[p] : s.blocks.peer_rows(pe, b);
  }
  s.landed = s.dest_rows[static_cast<std::size_t>(s.me)];
}

// Steps 1 and 2, on worker 0; a refusal goes to s.error.
void exchange_and_plan(MoeBuffer::State& s, const DispatchArgs& in, const DispatchOutputs& out,
                       std::uint64_t g, SourceWaits& waits, const LiveSet& live, int block) {
  const auto& c = s.cfg;
  CallHeader& mine = *s.headers.mine(g, s.me);
  mine = make_header(s, in, out, s.headers.counts(g, s.me), block);
  if (mine.error == InputError::kNone && c.header_ints > 0) {
    std::copy_n(in.header_ints, c.header_ints, s.headers.caller_ints(g, s.me));
  }
  const auto headers = s.headers.exchange(g, s.me, "dispatch header", &waits, live);
  s.error = first_call_error("dispatch", headers, s.me, s.experts(), c.max_bs);
  if (!s.error.empty()) return;
  s.retry = any_retry(headers);
  if (s.retry) return;
  s.error = s.shrink()
                ? plan_fixed_slots(s.headers, g, s.me, s.n_pes, c.experts_per_pe, in.expert_ids,
                                   in.bs, c.topk, c.max_bs, live, "dispatch", s.plan)
                : plan_routes(s.headers, g, s.me, s.n_pes, c.experts_per_pe, in.expert_ids, in.bs,
                              c.topk, s.recv_cap, "dispatch", "max_recv_rows", s.plan);
  if (!s.error.empty()) return;
  note_destinations(s, headers);
  // Every PE's header ints and counts, read before this PE raises dispatch-done g: no PE can
  // write call g + 2's headers (this parity) before then.
  if (out.all_header_ints != nullptr) {
    for (int src = 0; src < s.n_pes; ++src) {
      auto* to = out.all_header_ints + static_cast<std::size_t>(src) * c.header_ints;
      if (live.live(src)) {
        std::copy_n(s.headers.caller_ints(g, src), c.header_ints, to);
      } else {
        std::fill_n(to, c.header_ints, 0);  // a masked PE sent none
      }
    }
  }
  if (out.all_counts != nullptr)
    std::copy(s.plan.counts.begin(), s.plan.counts.end(), out.all_counts);
}

// One dispatch call: the state it carries between its phases, a method per phase, and the
// barriers between them in operator(), which each vector worker runs.
class DispatchCall {
 public:
  DispatchCall(MoeBuffer::State& s, const DispatchArgs& in, const DispatchOutputs& out,
               bool double_plane)
      : s_(s),
        c_(s.cfg),
        in_(in),
        out_(out),
        double_plane_(double_plane),
        g_(++s.dispatch_generation),
        waits_(s.n_pes),
        // A pe_mask where none belongs (shrink mode off) is refused on every PE through the
        // header; in shrink mode a PE without a usable mask cannot take part: it throws at once,
        // and the others mask it at their bound.
        mask_error_(s.check_mask("dispatch", in.pe_mask)),
        args_(in),
        live_(s.live_set(in.pe_mask)),
        block_(out.recv_block != nullptr && out.expand_x == nullptr &&
                       in.verdict == CallVerdict::kProceed && mask_error_.empty()
                   ? s.blocks.take()
                   : -1) {
    s_.timing = OpTiming{};
    s_.error.clear();
    s_.retry = false;
    s_.dispatched = false;
    if (!mask_error_.empty() && s_.shrink()) throw Refused(mask_error_);
    if (!mask_error_.empty()) args_.verdict = CallVerdict::kRefuse;
  }

  // A block taken for a call that did not complete goes back to the pool.
  ~DispatchCall() {
    if (block_ >= 0 && !block_given_) s_.blocks.release(block_, "dispatch");
  }
  DispatchCall(const DispatchCall&) = delete;
  DispatchCall& operator=(const DispatchCall&) = delete;

  void operator()(kernel::KernelContext& w) {
    const auto t0 = Clock::now();
    if (w.kind_id() == 0) plan();
    w.barrier();
    if (!s_.error.empty() || s_.retry) return;
    send_rows(w.kind_id(), w.kind_count());
    w.barrier();
    if (w.kind_id() == 0) {
      s_.engine->quiet();
      if (s_.shrink()) {
        s_.dispatch_done.raise_held_at_every_pe(s_.me, g_, live_);
        s_.dispatch_done.wait_for_every_pe(g_, "dispatch payload", &waits_, live_);
      } else {
        shmem_fence();
        s_.dispatch_done.all_reach(s_.me, g_, "dispatch payload", &waits_, live_);
      }
      comm_us_ = us_since(t0);
      count_received();
    }
    w.barrier();
    copy_out(w.kind_id(), w.kind_count());
  }

  // After the launch: the call's result (rows received, or kDispatchRetry) and its timing.
  int finish() {
    if (!s_.error.empty()) throw Refused(mask_error_.empty() ? s_.error : mask_error_);
    if (s_.retry) return kDispatchRetry;
    const auto& ids = in_.expert_ids;
    s_.dispatched_ids.assign(ids, ids + static_cast<std::size_t>(in_.bs) * c_.topk);
    s_.dispatched = true;
    record_timing();
    if (block_ >= 0) {
      *out_.recv_block = block_;
      *out_.recv_block_x = s_.blocks.rows(block_);
      block_given_ = true;
    }
    return total_rows_;
  }

 private:
  // Steps 1 and 2 (worker 0), then which segments go to the copy engine and whether the
  // payload bypasses the cache.
  void plan() {
    exchange_and_plan(s_, args_, out_, g_, waits_, live_, block_);
    if (!s_.error.empty()) return;
    const int P = s_.n_pes, L = c_.experts_per_pe;
    if (c_.recv_block_expert_rows > 0) run_shifts();
    if (double_plane_) {
      std::vector<std::size_t> seg(static_cast<std::size_t>(P) * L);
      for (int dst = 0; dst < P; ++dst) {
        for (int e = 0; e < L; ++e)
          seg[static_cast<std::size_t>(dst) * L + e] = s_.row_bytes * s_.plan.count(s_.me, dst, e);
      }
      by_engine_ = segments_for_copy_engine(seg, c_.doubleplane_threshold);
    }
    // A payload larger than the cache goes around it: ordinary stores would read every line of
    // the receive window before overwriting it, a third of the traffic.
    bypass_cache_ = rows_sent() * s_.row_bytes >= kStreamingCopyThreshold;
  }

  // Receivers whose rows land in a block of per-expert runs: each expert's packed rows move to
  // its run (the side-band stays packed). shift_ is [dst][expert] rows, 0 elsewhere.
  void run_shifts() {
    const int P = s_.n_pes, L = c_.experts_per_pe;
    shift_.assign(static_cast<std::size_t>(P) * L, 0);
    for (int dst = 0; dst < P; ++dst) {
      if (s_.dest_rows[static_cast<std::size_t>(dst)] == s_.recv_rows) continue;
      std::int64_t first = 0;  // the expert's first packed row
      for (int e = 0; e < L; ++e) {
        shift_[static_cast<std::size_t>(dst) * L + e] =
            static_cast<std::int64_t>(e) * c_.recv_block_expert_rows - first;
        first += s_.plan.expert_rows(dst, e);
      }
    }
  }

  std::size_t rows_sent() const {
    return static_cast<std::size_t>(std::count_if(s_.plan.positions.begin(),
                                                  s_.plan.positions.end(),
                                                  [](std::int64_t pos) { return pos >= 0; }));
  }

  // Step 3: this worker's share of the (token, slot) pairs, each row and its side-band.
  void send_rows(int id, int nw) {
    const int L = c_.experts_per_pe;
    const std::size_t side = static_cast<std::size_t>(c_.token_side_bytes);
    const std::size_t pairs = s_.plan.positions.size();
    const std::size_t lo = pairs * id / nw, hi = pairs * (id + 1) / nw;
    std::vector<kernel::RemoteCopy> engine_copies;
    std::vector<std::byte> band(s_.band_bytes);  // one row's side-band, sent in one put
    for (std::size_t i = lo; i < hi; ++i) {
      const std::int64_t pos = s_.plan.positions[i];
      if (pos < 0) continue;
      const int e = in_.expert_ids[i], dst = e / L;
      const auto at =
          static_cast<std::size_t>(shift_.empty() ? pos : pos + shift_[e]) * s_.row_bytes;
      const int t = static_cast<int>(i / c_.topk), k = static_cast<int>(i % c_.topk);
      const void* row =
          static_cast<const std::byte*>(in_.x) + static_cast<std::size_t>(t) * s_.row_bytes;
      void* to = s_.dest_rows[dst] + at;
      if (!by_engine_.empty() && by_engine_[e]) {
        engine_copies.push_back({to, row, s_.row_bytes, dst, bypass_cache_});
      } else if (bypass_cache_ && s_.peer_landed[dst] != nullptr) {
        copy_non_temporal(s_.peer_landed[dst] + at, row, s_.row_bytes);
      } else {
        shmem_putmem(to, row, s_.row_bytes, dst);
      }
      const RowMeta meta{s_.me, t, k, in_.expert_scales ? in_.expert_scales[i] : 1.0f};
      std::memcpy(band.data(), &meta, sizeof meta);
      if (side > 0) {
        std::memcpy(
            band.data() + sizeof meta,
            static_cast<const std::byte*>(in_.token_side) + static_cast<std::size_t>(t) * side,
            side);
      }
      shmem_putmem(s_.recv_band + static_cast<std::size_t>(pos) * s_.band_bytes, band.data(),
                   s_.band_bytes, dst);
    }
    s_.engine->submit(std::move(engine_copies));
    // This thread's stores, non-temporal ones included, before the barrier (a quiet over UCX
    // alone would not fence the ones into this PE's own window). Shrink mode waits for no PE on
    // another host: the done flags are held until the rows land (raise_held_at_every_pe).
    if (bypass_cache_) fence_non_temporal();
    if (s_.shrink()) {
      shmem_pe_quiet(&s_.me, 1);
    } else {
      shmem_quiet();
    }
  }

  // Step 4's outputs that come from the counts alone (a source masked by now counts none), and
  // in shrink mode where each received row lies in the window (fixed slots, expand_x's order).
  void count_received() {
    const int P = s_.n_pes, L = c_.experts_per_pe;
    std::int32_t running = 0;
    for (int e = 0; e < L; ++e) {
      std::int32_t expert_total = 0;
      for (int src = 0; src < P; ++src) {
        const std::int32_t n = live_.live(src) ? s_.plan.count(src, s_.me, e) : 0;
        if (s_.shrink()) {
          const std::int64_t slot0 = fixed_slot(P, c_.max_bs, e, src);
          for (std::int32_t j = 0; j < n; ++j) window_row_.push_back(slot0 + j);
        }
        running += n;
        expert_total += n;
        out_.ep_recv_count[e * P + src] = running;
      }
      out_.expert_token_nums[e] = expert_total;
    }
    total_rows_ = running;
  }

  // Where expand_x's row r lies in the window: at r, or (shrink mode) in its fixed slot.
  std::size_t in_window(std::size_t r) const {
    return window_row_.empty() ? r : static_cast<std::size_t>(window_row_[r]);
  }

  // Step 4's copy-out, split by rows: the rows (unless the caller reads the window), then each
  // row's side-band into the outputs.
  void copy_out(int id, int nw) {
    const std::size_t side = static_cast<std::size_t>(c_.token_side_bytes);
    const std::size_t rows = static_cast<std::size_t>(total_rows_);
    const std::size_t r0 = rows * id / nw, r1 = rows * (id + 1) / nw;
    // Shrink mode with the window as expand_x: the rows stay in their slots, and their
    // side-band goes to the same rows of the outputs.
    const bool in_slots = !window_row_.empty() && out_.expand_x == s_.recv_rows;
    auto* expand_x = static_cast<std::byte*>(out_.expand_x);
    if (in_slots) {
      // nothing to copy
    } else if (!window_row_.empty()) {
      for (std::size_t r = r0; r < r1; ++r) {
        std::memcpy(expand_x + r * s_.row_bytes, s_.recv_rows + in_window(r) * s_.row_bytes,
                    s_.row_bytes);
      }
    } else if (out_.expand_x != nullptr && out_.expand_x != s_.recv_rows) {  // not in a block
      std::memcpy(expand_x + r0 * s_.row_bytes, s_.recv_rows + r0 * s_.row_bytes,
                  (r1 - r0) * s_.row_bytes);
    }
    for (std::size_t row = r0; row < r1; ++row) {
      const std::byte* at = s_.recv_band + in_window(row) * s_.band_bytes;
      const std::size_t r = in_slots ? in_window(row) : row;
      RowMeta m;
      std::memcpy(&m, at, sizeof m);
      if (out_.expand_side != nullptr && side > 0)
        std::memcpy(static_cast<std::byte*>(out_.expand_side) + r * side, at + sizeof m, side);
      out_.assist_info[3 * r] = m.src_pe;
      out_.assist_info[3 * r + 1] = m.token;
      out_.assist_info[3 * r + 2] = m.slot;
      if (out_.expand_scales != nullptr) out_.expand_scales[r] = m.scale;
    }
  }

  void record_timing() {
    const int L = c_.experts_per_pe;
    s_.timing.worker_us.clear();
    for (int i = 0; i < c_.workers.vector; ++i)
      s_.timing.worker_us.push_back(s_.pool->last_worker_seconds()[i] * 1e6);
    s_.timing.comm_us = comm_us_;
    s_.timing.source_wait_us = waits_.us();
    s_.timing.rows_received = total_rows_;
    s_.timing.bytes_sent = rows_sent() * s_.row_bytes;
    std::size_t engine_bytes = 0;
    for (std::size_t e = 0; e < by_engine_.size(); ++e) {
      if (by_engine_[e])
        engine_bytes +=
            s_.row_bytes * s_.plan.count(s_.me, static_cast<int>(e) / L, static_cast<int>(e) % L);
    }
    s_.timing.bytes_via_copy_engine = engine_bytes;
  }

  MoeBuffer::State& s_;
  const MoeConfig& c_;
  const DispatchArgs& in_;
  const DispatchOutputs& out_;
  const bool double_plane_;
  const std::uint64_t g_;
  SourceWaits waits_;
  const std::string mask_error_;
  DispatchArgs args_;  // in_, with a refusal verdict where the mask is refused
  const LiveSet live_;
  const int block_;  // the receive block taken for the caller, or -1
  bool block_given_ = false;
  std::vector<bool> by_engine_;      // per (destination, expert) segment of mine
  std::vector<std::int64_t> shift_;  // recv_block_expert_rows: see run_shifts
  bool bypass_cache_ = false;
  std::vector<std::int64_t> window_row_;  // shrink mode: each row's slot, in expand_x's order
  double comm_us_ = 0;
  int total_rows_ = 0;
};

int run_dispatch(MoeBuffer& ctx, const DispatchArgs& in, const DispatchOutputs& out,
                 bool double_plane) {
  auto& s = ctx.state();
  DispatchCall call(s, in, out, double_plane);
  s.pool->launch({0, s.cfg.workers.vector}, [&call](kernel::KernelContext& w) { call(w); });
  return call.finish();
}

}  // namespace

int dispatch_classic(MoeBuffer& ctx, const DispatchArgs& in, const DispatchOutputs& out) {
  return run_dispatch(ctx, in, out, false);
}

int dispatch_doubleplane(MoeBuffer& ctx, const DispatchArgs& in, const DispatchOutputs& out) {
  return run_dispatch(ctx, in, out, true);
}

}  // namespace shmoe::moe
