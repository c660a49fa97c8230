// MegaMoE: a whole MoE layer as one operator launch on each PE. Route, dispatch, FP8 (MX)
// quantization, GEMM1, SwiGLU, GEMM2 and combine run on the PE's worker pool without returning
// to the host: matrix workers run the GEMMs, vector workers quantize, move rows, apply SwiGLU and
// combine, and the stages overlap wave by wave.
//
// The same layer is also available as the unfused chain (separate steps with a barrier between
// each, using dispatch_classic and combine_classic); both give bitwise-identical outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernel/stage_trace.hpp"
#include "kernel/worker_pool.hpp"
#include "moe/expert_ffn.hpp"
#include "moe/moe.hpp"

namespace shmoe::moe {

// Who applies SwiGLU to a matrix worker's waves and writes their outputs back.
enum class MegaSchedule : std::uint8_t {
  // kOverlapped where this PE's share of its host's cores can run all its workers at once,
  // kSolo where that share is under two cores, kInline in between.
  kAuto,
  // Its two vector workers, overlapping the matrix worker's next GEMMs (ping-pong tiles). Pays
  // only with cores to run them on: time-sliced on the matrix worker's core, the overlap is
  // gone and the four hand-overs per wave (futex wake-ups, yields) remain.
  kOverlapped,
  // The matrix worker itself, wave after wave: no hand-overs, and SwiGLU reads GEMM1's output
  // while it is still in the core's cache. The vector workers quantize, dispatch and reduce.
  kInline,
  // No workers: the calling thread does every worker's part in turn (plan, quantize, dispatch,
  // the waves inline, combine). Where a PE has one core or less, its workers could only take
  // turns on it, and each hand-over between them (the launch, the plan, the barrier, the end)
  // costs a wake-up: tens of microseconds in a VM, most of a decode call's fixed cost.
  kSolo,
};

// How the experts' weights are kept (mega_gemm.hpp): as the FP8 codes and scales given (1.03
// bytes per parameter, read directly by tiles of up to GemmEngine::kDirectRows rows), or expanded
// to bf16 (fp32 where the CPU has no bf16 dot products) and packed for oneDNN. The FP8 form wins
// where an expert gets up to about 4 rows a call, which reading half the bytes pays for; at about 6
// the two are even, and from 8 the packed form wins (AMD EPYC with AVX512-BF16, FP8 / bf16 time:
// 0.30-0.42 at 1 token per PE on 2 PEs, 0.4-0.7 at 3 and 4 rows per expert (16 tokens on 2 PEs,
// Qwen3-30B-A3B's layer on 4), 0.9-1.3 at 6 (DeepSeek-V2-Lite's on 4 PEs), 1.6-2.1 from 8;
// docs/performance/).
// kAuto picks kFp8 where tokens * topk <= kFp8RowsPerExpert * experts_per_pe, at most that many
// rows per local expert on average at the configured tokens, and kBf16 above.
enum class MegaWeights : std::uint8_t { kAuto, kFp8, kBf16 };
inline constexpr int kFp8RowsPerExpert = 4;

struct MegaMoEConfig {
  int tokens = 0;  // T: the most tokens any call passes on any PE
  int model_dim = 0;
  int ffn_dim = 0;  // even: GEMM1's output is split in two halves for SwiGLU
  int topk = 1;
  int experts_per_pe = 1;  // L; expert e lives on PE e / L
  numeric::Fp8Format format = numeric::Fp8Format::kE4M3;
  // Rows (token copies) a PE can receive in one call; 0: n_pes * tokens * topk (never overflows).
  std::size_t max_received_tokens = 0;
  // {0, 0}: 1 matrix and 2 vector workers. Otherwise vector must be 2 * matrix.
  kernel::WorkerCounts workers{0, 0};
  // Rows per GEMM tile and per readiness counter; 0: automatic (auto_wave_rows), resolved at
  // creation, each PE its own (the call header tells the senders). Each wave costs four
  // hand-overs between a matrix worker and its vector workers in the overlapped schedule (futex
  // wake-ups, 0.05-0.2 ms in a VM), and the GEMMs run closer to their untiled rate on taller
  // tiles: at the decode shape on 2 cores, 128-row waves took 31 ms against 72 ms for 32 rows.
  int wave_rows = 0;
  MegaSchedule schedule = MegaSchedule::kAuto;
  MegaWeights weights = MegaWeights::kAuto;  // resolved in config(): kFp8 or kBf16
};

// This PE's L local experts in MX FP8, rows along the reduction dimension (ExpertFfnShape):
// w1[e] is ffn_dim rows of MxRow{model_dim}, w2[e] is model_dim rows of MxRow{ffn_dim / 2}.
struct MegaMoEWeights {
  std::vector<const std::uint8_t*> w1, w2;
};

class UnfusedChain;

struct MegaMoEArgs {
  const std::uint16_t* x = nullptr;          // [tokens, model_dim] BF16
  const std::int32_t* expert_ids = nullptr;  // [tokens, topk]; -1 = no expert
  const float* routing_weights = nullptr;    // [tokens, topk]
  int tokens = 0;
  std::uint16_t* y = nullptr;                   // [tokens, model_dim] BF16, written
  std::int32_t* expert_token_counts = nullptr;  // [experts_per_pe], written: rows received
};

class MegaMoE {
 public:
  MegaMoE(const MegaMoEConfig& config, const MegaMoEWeights& weights);  // collective
  ~MegaMoE();                                                           // collective
  MegaMoE(const MegaMoE&) = delete;
  MegaMoE& operator=(const MegaMoE&) = delete;

  // Collective. A refused call (bad input anywhere, PEs that disagree on the parameters, a PE
  // that would receive more than max_received_tokens) throws Refused on every PE.
  void run(const MegaMoEArgs& args);
  void run_unfused(const MegaMoEArgs& args);

  // The config, with defaults resolved (workers; schedule: kOverlapped or kInline; weights: kFp8
  // or kBf16).
  const MegaMoEConfig& config() const;
  // The GEMM engine, in words ("oneDNN 2.6.3, bf16 inputs (avx512_core_bf16)").
  std::string gemm_engine() const;
  // Bytes the local experts' weights take in the form config().weights keeps them.
  std::size_t weight_bytes() const;
  // Microseconds of the last call's operator launches (kernel time, without argument checks).
  double last_kernel_us() const;
  // Records every worker's stages of the following calls (fused only).
  void set_tracing(bool on);
  std::vector<kernel::StageEvent> last_trace() const;

  // Symmetric heap bytes each PE needs for this config: the fused operator's window, and with
  // `unfused` also the windows of the dispatch and combine operators the unfused chain uses.
  static std::size_t symmetric_bytes(const MegaMoEConfig& config, int n_pes, bool unfused);

  struct State;

 private:
  std::unique_ptr<State> state_;
  std::unique_ptr<UnfusedChain> unfused_;  // made by the first run_unfused
};

}  // namespace shmoe::moe
