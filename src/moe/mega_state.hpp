// The inside of a MegaMoE: its symmetric window, the expert weights, the wave plan of a call and
// the hand-over slots between matrix and vector workers.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "moe/mega_moe.hpp"
#include "moe/operator_state.hpp"

namespace shmoe::moe {

// A tile of rows of one local expert: GEMM tiles and readiness counters both follow waves, and
// the fused operator and the unfused chain cut the same waves (identical GEMM shapes, so
// identical bits).
struct Wave {
  int expert = 0;
  std::int64_t row0 = 0;  // in the received-row layout (by expert, then source, then token)
  int rows = 0;
};

// Cuts each local expert's rows [start, start + rows) into waves of `wave_rows`.
std::vector<Wave> cut_waves(const std::vector<std::int64_t>& rows_per_expert, int wave_rows);

// Hand-over between a matrix worker and its two vector workers, for two tiles in flight
// (ping-pong): slot p carries the worker's waves j with j % 2 == p. Each word counts the uses of
// its slot so far (WakeWord values, so doubled: bit 0 is the waiters' flag). Waiters sleep on
// the word rather than poll it, which matters when PEs outnumber cores: a worker waiting for its
// partner must leave the core to the partner. A word never runs more than one use ahead of its
// waiter (each side waits for the other before reusing a slot), so waiting for equality is safe.
struct TileSlots {
  struct alignas(64) Words {
    std::uint32_t h_full[2] = {0, 0};                 // GEMM1 output ready (matrix)
    std::uint32_t out_full[2] = {0, 0};               // GEMM2 output ready (matrix)
    std::uint32_t act_done[2][2] = {{0, 0}, {0, 0}};  // [slot][half]: SwiGLU done (vector)
    std::uint32_t out_free[2][2] = {{0, 0}, {0, 0}};  // [slot][half]: written back (vector)
  } words;                                            // zeroed before every call
  std::vector<float> h[2];                            // [wave_rows][F]
  std::vector<std::byte> act[2];                      // [wave_rows][act_row bytes]
  std::vector<std::uint16_t> out[2];                  // [wave_rows][D] BF16
  // A worker that runs its waves itself (inline, solo): GEMM2's input, as gemm1_swiglu writes it.
  std::vector<std::byte> gemm2_in;
  FfnScratch scratch;  // the matrix worker's, kept between calls (no allocation in a call)
};

// The common parts (operator_state.hpp), and MegaMoE's own: recv_rows holds
// [recv_cap][row_slot], combine_rows [tokens * topk][model_dim] BF16.
struct MegaMoE::State : OperatorState {
  MegaMoEConfig cfg;
  ExpertFfnShape shape;
  std::size_t max_waves = 0;
  // Bytes per received row: its token row, then its RowMeta, so that one put carries both.
  std::size_t row_slot = 0;
  GemmEngine gemm;
  std::vector<ExpertWeights> weights;  // [L], packed by the matrix workers

  // The window's own part.
  std::uint64_t* wave_arrivals = nullptr;  // [max_waves], 64 bytes apart: rows arrived, cumulative
  std::uint64_t generation = 0;
  // What wave_arrivals[w] held when wave w was last complete (this PE alone reads its counters).
  std::vector<std::uint64_t> arrivals_seen;

  // This PE's tokens, quantized: [tokens][row_slot] (the unfused chain packs them densely).
  std::vector<std::byte> my_rows;
  std::vector<std::unique_ptr<TileSlots>> slots;  // per matrix worker
  std::uint32_t plan_published =
      0;  // WakeWord: 2 once vector 0 has planned the call; zeroed per call
  kernel::StageTrace trace;
  double kernel_us = 0;

  // Per call, filled by vector worker 0 before a worker barrier (with the plan).
  std::vector<Wave> waves;

  std::uint64_t* arrivals(std::size_t wave) const {
    return wave_arrivals + wave * (64 / sizeof(std::uint64_t));
  }
  int experts() const { return n_pes * cfg.experts_per_pe; }
  RowMeta received_meta(std::int64_t row) const {
    RowMeta m;
    std::memcpy(&m,
                recv_rows + static_cast<std::size_t>(row) * row_slot + shape.token_row().bytes(),
                sizeof m);
    return m;
  }
  // Byte offset in its source PE's combine rows where received row `meta`'s output goes: (token,
  // slot), model_dim BF16 elements each.
  std::size_t combine_offset(const RowMeta& meta) const {
    return (static_cast<std::size_t>(meta.token) * cfg.topk + meta.slot) * cfg.model_dim * 2;
  }
};

// A received row's slot: the token row and its RowMeta, 16-byte aligned.
inline std::size_t row_slot_bytes(const ExpertFfnShape& shape) {
  return (shape.token_row().bytes() + sizeof(RowMeta) + 15) / 16 * 16;
}

// The call header of a MegaMoE call: parameters, routing counts and input errors.
CallHeader mega_header(const MegaMoE::State& s, const MegaMoEArgs& in, std::int32_t* counts);

}  // namespace shmoe::moe
