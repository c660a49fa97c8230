// The inside of a MoeBuffer: symmetric window, flags, generation counters, workers, and the
// per-call plan shared by the operators.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernel/copy_engine.hpp"
#include "kernel/worker_pool.hpp"
#include "moe/moe.hpp"
#include "moe/operator_state.hpp"
#include "moe/recv_blocks.hpp"

namespace shmoe::moe {

// The common parts (operator_state.hpp), and dispatch/combine's own: recv_rows holds
// [recv_cap][row_bytes], combine_rows [max_bs * topk][row_bytes].
struct MoeBuffer::State : OperatorState {
  MoeConfig cfg;
  std::size_t row_bytes = 0;

  // The window's own parts, as addresses on this PE.
  // Each received row's side-band: its RowMeta, then the caller's token_side_bytes.
  std::byte* recv_band = nullptr;  // [recv_cap][band_bytes]
  std::size_t band_bytes = 0;
  // recv_rows as mapped on each PE (null for a PE on another host); all non-null, a combine from
  // the receive windows pulls rows instead of sending them. Shrink mode always pulls: by gets
  // from the null ones.
  std::vector<std::byte*> peer_recv_rows;
  RecvBlocks blocks;
  // Where the last dispatch's rows landed: on this PE (the receive window or a receive block),
  // and on each PE as mapped here (null where not mapped), from each receiver's call header.
  std::byte* landed = nullptr;
  std::vector<std::byte*> peer_landed;
  // The current dispatch's: where each receiver's rows go (a symmetric address, this PE's own
  // receive window or block of the receiver's choice).
  std::vector<std::byte*> dest_rows;
  FlagArray dispatch_done;
  Agreement combine_entry;  // each PE's verdict on its inputs; its window is free again
  FlagArray combine_pulls;  // set to g by a PE whose combine g may pull from the receive windows

  std::uint64_t dispatch_generation = 0;
  std::uint64_t combine_generation = 0;
  // Shrink mode: at PE X, the call whose combine reads each PE ended without X (X was late).
  FlagArray read_masks;
  // Shrink mode: this PE's own record of the same (slot X: the last call whose reads of this
  // PE's window it ended without X), written before it goes on; X reads it by a get.
  FlagArray read_masked;
  FlagArray live_sync;  // shrink mode's sync_live barrier
  std::uint64_t sync_generation = 0;
  // Shrink mode's rejoin: its flags (two parities), and each PE's call counters, [2][n_pes] rows
  // of kRejoinWords, which a PE puts into every PE's row of it before raising its flag.
  FlagArray rejoin_flags[2];
  std::uint64_t* rejoin_counters = nullptr;
  std::uint64_t rejoin_generation = 0;
  // This PE's record of its last rejoin attempt a (slot X: arrived(a) if X came, left_without(a)
  // if not), written before it goes on; a PE on another host reads it (settle_rejoin_outcomes).
  FlagArray rejoin_outcome;
  ShrinkWords shrink_words;  // shrink mode's, shared with the other PEs (protocol.hpp)
  // Per context: the dispatch, combine and sync generations; a rejoin carries those of up to
  // kMaxRejoinContexts contexts.
  static constexpr int kCounters = 3, kMaxRejoinContexts = 32;
  static constexpr int kRejoinWords = kCounters * kMaxRejoinContexts;
  // Shrink mode: PEs that missed only the last step of a combine (their reads of this PE's
  // window), whose experts that combine's sums already hold: masked from the next call on, so
  // that a call's mask always says whose experts its results left out.
  std::vector<std::int32_t> late_mask;

  std::unique_ptr<kernel::CopyEngine> engine;
  OpTiming timing;

  // The routing of this PE's tokens in the last successful dispatch, whose rows the receive
  // windows hold: a combine may pull them only with this same routing.
  std::vector<std::int32_t> dispatched_ids;
  bool dispatched = false;
  bool retry = false;  // the current dispatch: some PE's verdict was kRetry

  int experts() const { return n_pes * cfg.experts_per_pe; }
  bool shrink() const { return cfg.shrink_timeout_ms > 0; }
  // Shrink mode's view of the job for a call that passed `pe_mask` (shrink mode off: all live).
  LiveSet live_set(std::int32_t* pe_mask) const {
    return shrink()
               ? LiveSet(pe_mask, std::chrono::milliseconds(cfg.shrink_timeout_ms), &shrink_words)
               : LiveSet();
  }
  // Shrink mode's check of a call's pe_mask, or "" (the call's own PE, by its own mask). A good
  // mask takes in the PEs the last combine found late.
  std::string check_mask(const char* op, std::int32_t* pe_mask);
  // For a combine's last step: the call's live PEs, masking the late ones into late_mask ...
  LiveSet late_set(const LiveSet& live);
  // ... and after it, late_mask keeps only those (not the PEs the call had masked already).
  void keep_only_late(const LiveSet& live);
};

// Shrink mode's rejoin, attempt `a`, once its meet has masked (in `live`) the PEs that did not
// come: records the outcome, then masks the PEs on other hosts whose own record of the attempt
// leaves this PE out (or that do not answer). Their flags at this PE are held until their data
// lands, so a PE resumed after a stop may take their arrivals for attempt a, landing late, before
// their "ended without you"; their records, read after the attempt, are not late so.
void settle_rejoin_outcomes(MoeBuffer::State& s, std::uint64_t a, const LiveSet& live);

// Which segments of a call go through the copy engine: those of at least the threshold and
// above the average segment size (so the engine takes the few big ones, the workers the rest).
std::vector<bool> segments_for_copy_engine(const std::vector<std::size_t>& segment_bytes,
                                           std::size_t threshold);

}  // namespace shmoe::moe
