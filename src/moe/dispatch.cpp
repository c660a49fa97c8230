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
//     the caller reads them where they landed (expand_x is the receive window).
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

CallHeader make_header(const MoeContext::State& s, const DispatchArgs& in,
                       const DispatchOutputs& out, std::int32_t* counts) {
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
  if (inputs_missing) {
    refuse_null(h, in.x == nullptr ? Tensor::kX : Tensor::kExpertIds);
  } else if (out.expand_x == nullptr) {
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

// Steps 1 and 2, on worker 0; a refusal goes to s.error.
void exchange_and_plan(MoeContext::State& s, const DispatchArgs& in, const DispatchOutputs& out,
                       std::uint64_t g, SourceWaits& waits, const LiveSet& live) {
  const auto& c = s.cfg;
  CallHeader& mine = *s.headers.mine(g, s.me);
  mine = make_header(s, in, out, s.headers.counts(g, s.me));
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

int run_dispatch(MoeContext& ctx, const DispatchArgs& in, const DispatchOutputs& out,
                 bool double_plane) {
  auto& s = ctx.state();
  const auto& c = s.cfg;
  const std::uint64_t g = ++s.dispatch_generation;
  const int P = s.n_pes, L = c.experts_per_pe;
  const std::size_t side = static_cast<std::size_t>(c.token_side_bytes);
  s.timing = OpTiming{};
  s.error.clear();
  s.retry = false;
  s.dispatched = false;
  std::vector<bool> by_engine;  // per (destination, expert) segment of mine
  std::size_t engine_bytes = 0;
  double comm_us = 0;
  int total_rows = 0;
  SourceWaits waits(P);
  // A pe_mask where none belongs (shrink mode off) is refused on every PE through the header; in
  // shrink mode a PE without a usable mask cannot take part: it throws at once, and the others
  // mask it at their bound.
  const std::string mask_error = s.check_mask("dispatch", in.pe_mask);
  if (!mask_error.empty() && s.shrink()) throw MoeError(mask_error);
  DispatchArgs args = in;
  if (!mask_error.empty()) args.verdict = CallVerdict::kRefuse;
  const LiveSet live = s.live_set(in.pe_mask);
  // Shrink mode: each received row's place in the window (fixed slots), in expand_x's order.
  std::vector<std::int64_t> window_row;
  // A payload larger than the cache goes around it: ordinary stores would read every line of the
  // receive window before overwriting it, a third of the traffic.
  bool bypass_cache = false;

  auto kernel = [&](kernel::KernelContext& w) {
    const int id = w.kind_id(), nw = w.kind_count();
    auto t0 = Clock::now();
    if (id == 0) {
      exchange_and_plan(s, args, out, g, waits, live);
      if (s.error.empty() && double_plane) {
        std::vector<std::size_t> seg(static_cast<std::size_t>(P) * L);
        for (int dst = 0; dst < P; ++dst) {
          for (int e = 0; e < L; ++e)
            seg[static_cast<std::size_t>(dst) * L + e] = s.row_bytes * s.plan.count(s.me, dst, e);
        }
        by_engine = segments_for_copy_engine(seg, c.doubleplane_threshold);
      }
      if (s.error.empty()) {
        const auto sent = std::count_if(s.plan.positions.begin(), s.plan.positions.end(),
                                        [](std::int64_t pos) { return pos >= 0; });
        bypass_cache = static_cast<std::size_t>(sent) * s.row_bytes >= kStreamingCopyThreshold;
      }
    }
    w.barrier();
    if (!s.error.empty() || s.retry) return;

    // Payload: the (token, slot) pairs are split evenly over the workers.
    const std::size_t pairs = s.plan.positions.size();
    const std::size_t lo = pairs * id / nw, hi = pairs * (id + 1) / nw;
    std::vector<kernel::RemoteCopy> engine_copies;
    std::vector<std::byte> band(s.band_bytes);  // one row's side-band, sent in one put
    for (std::size_t i = lo; i < hi; ++i) {
      const std::int64_t pos = s.plan.positions[i];
      if (pos < 0) continue;
      const int e = in.expert_ids[i], dst = e / L;
      const int t = static_cast<int>(i / c.topk), k = static_cast<int>(i % c.topk);
      const void* row =
          static_cast<const std::byte*>(in.x) + static_cast<std::size_t>(t) * s.row_bytes;
      void* to = s.recv_rows + static_cast<std::size_t>(pos) * s.row_bytes;
      if (!by_engine.empty() && by_engine[e]) {
        engine_copies.push_back({to, row, s.row_bytes, dst, bypass_cache});
      } else if (bypass_cache && s.peer_recv_rows[dst] != nullptr) {
        copy_non_temporal(s.peer_recv_rows[dst] + static_cast<std::size_t>(pos) * s.row_bytes, row,
                          s.row_bytes);
      } else {
        shmem_putmem(to, row, s.row_bytes, dst);
      }
      const RowMeta meta{s.me, t, k, in.expert_scales ? in.expert_scales[i] : 1.0f};
      std::memcpy(band.data(), &meta, sizeof meta);
      if (side > 0) {
        std::memcpy(
            band.data() + sizeof meta,
            static_cast<const std::byte*>(in.token_side) + static_cast<std::size_t>(t) * side,
            side);
      }
      shmem_putmem(s.recv_band + static_cast<std::size_t>(pos) * s.band_bytes, band.data(),
                   s.band_bytes, dst);
    }
    s.engine->submit(std::move(engine_copies));
    // This thread's stores, non-temporal ones included, before the barrier (a quiet over UCX
    // alone would not fence the ones into this PE's own window).
    if (bypass_cache) fence_non_temporal();
    shmem_quiet();
    w.barrier();
    if (id == 0) {
      s.engine->quiet();
      shmem_fence();
      s.dispatch_done.all_reach(s.me, g, "dispatch payload", &waits, live);
      comm_us = us_since(t0);
      // Outputs that come from the counts alone (a source masked by now counts none).
      std::int32_t running = 0;
      for (int e = 0; e < L; ++e) {
        std::int32_t expert_total = 0;
        for (int src = 0; src < P; ++src) {
          const std::int32_t n = live.live(src) ? s.plan.count(src, s.me, e) : 0;
          if (s.shrink()) {
            const std::int64_t slot0 = fixed_slot(P, c.max_bs, e, src);
            for (std::int32_t j = 0; j < n; ++j) window_row.push_back(slot0 + j);
          }
          running += n;
          expert_total += n;
          out.ep_recv_count[e * P + src] = running;
        }
        out.expert_token_nums[e] = expert_total;
      }
      total_rows = running;
    }
    w.barrier();
    // Copy-out, split by rows.
    const std::size_t rows = static_cast<std::size_t>(total_rows);
    const std::size_t r0 = rows * id / nw, r1 = rows * (id + 1) / nw;
    // Where expand_x's row r lies in the window: at r, or (shrink mode) in its fixed slot.
    auto in_window = [&](std::size_t r) {
      return window_row.empty() ? r : static_cast<std::size_t>(window_row[r]);
    };
    // Shrink mode with the window as expand_x: the rows stay in their slots, and their
    // side-band goes to the same rows of the outputs.
    const bool in_slots = !window_row.empty() && out.expand_x == s.recv_rows;
    if (in_slots) {
      // nothing to copy
    } else if (!window_row.empty()) {
      for (std::size_t r = r0; r < r1; ++r) {
        std::memcpy(static_cast<std::byte*>(out.expand_x) + r * s.row_bytes,
                    s.recv_rows + in_window(r) * s.row_bytes, s.row_bytes);
      }
    } else if (out.expand_x != s.recv_rows) {
      std::memcpy(static_cast<std::byte*>(out.expand_x) + r0 * s.row_bytes,
                  s.recv_rows + r0 * s.row_bytes, (r1 - r0) * s.row_bytes);
    }
    for (std::size_t row = r0; row < r1; ++row) {
      const std::byte* at = s.recv_band + in_window(row) * s.band_bytes;
      const std::size_t r = in_slots ? in_window(row) : row;
      RowMeta m;
      std::memcpy(&m, at, sizeof m);
      if (out.expand_side != nullptr && side > 0)
        std::memcpy(static_cast<std::byte*>(out.expand_side) + r * side, at + sizeof m, side);
      out.assist_info[3 * r] = m.src_pe;
      out.assist_info[3 * r + 1] = m.token;
      out.assist_info[3 * r + 2] = m.slot;
      if (out.expand_scales != nullptr) out.expand_scales[r] = m.scale;
    }
  };
  s.pool->launch({0, c.workers.vector}, kernel);
  if (!s.error.empty()) throw MoeError(mask_error.empty() ? s.error : mask_error);
  if (s.retry) return kDispatchRetry;
  s.dispatched_ids.assign(in.expert_ids, in.expert_ids + static_cast<std::size_t>(in.bs) * c.topk);
  s.dispatched = true;
  s.timing.worker_us.clear();
  for (int i = 0; i < c.workers.vector; ++i)
    s.timing.worker_us.push_back(s.pool->last_worker_seconds()[i] * 1e6);
  s.timing.comm_us = comm_us;
  s.timing.source_wait_us = waits.us();
  s.timing.rows_received = total_rows;
  std::size_t sent = 0;
  for (auto p : s.plan.positions) sent += p >= 0;
  s.timing.bytes_sent = sent * s.row_bytes;
  for (std::size_t e = 0; e < by_engine.size(); ++e) {
    if (by_engine[e])
      engine_bytes +=
          s.row_bytes * s.plan.count(s.me, static_cast<int>(e) / L, static_cast<int>(e) % L);
  }
  s.timing.bytes_via_copy_engine = engine_bytes;
  return total_rows;
}

}  // namespace

int dispatch_classic(MoeContext& ctx, const DispatchArgs& in, const DispatchOutputs& out) {
  return run_dispatch(ctx, in, out, false);
}

int dispatch_doubleplane(MoeContext& ctx, const DispatchArgs& in, const DispatchOutputs& out) {
  return run_dispatch(ctx, in, out, true);
}

}  // namespace shmoe::moe
