// Expert-parallel MoE communication operators on shmoe: dispatch sends each token to the PEs
// that own its top-k experts; combine brings the experts' outputs back and sums them, weighted,
// at the token's home PE.
//
// A MoeBuffer is created collectively (every PE, same config) and owns the symmetric windows and
// flags. Calls on it are collective too: every PE calls the same operator, in the same order.
// Buffers are reused from call to call without any reset: flags carry generation numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "kernel/worker_pool.hpp"
#include "moe/dtype.hpp"

namespace shmoe::moe {

// A refused call: bad input on some PE, PEs that disagree on the parameters, or a window too
// small. Every PE throws it with the same message, so none is left waiting.
class Refused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MoeConfig {
  int experts_per_pe = 1;  // L; the job has E = n_pes * L experts, expert e lives on PE e / L
  int max_bs = 0;          // the most tokens any call passes on any PE
  int hidden = 0;          // h: elements per token row
  int topk = 1;
  DType dtype = DType::kFloat32;
  // Rows a PE can receive in one dispatch; 0 means n_pes * max_bs * topk, which never overflows.
  std::size_t max_recv_rows = 0;
  kernel::WorkerCounts workers{0, 0};            // {0, 0}: default_worker_counts()
  std::size_t doubleplane_threshold = 2u << 20;  // bytes; see dispatch_doubleplane
  // Bytes of caller data that travel with each of a token's rows (DispatchArgs::token_side):
  // what a layer over dispatch needs at the receiver per token, such as DeepEP's top-k indices
  // and weights, without a second exchange.
  int token_side_bytes = 0;
  // int32 values each PE adds to dispatch's call header (DispatchArgs::header_ints); every PE
  // receives every PE's (DispatchOutputs::all_header_ints), with the counts, in the same step.
  int header_ints = 0;
  // Shrink mode when > 0 (shmoe_moe_config_t::shrink_timeout_ms): waits end after this long,
  // masking the PEs that did not arrive; the receive window has a fixed slot per (local expert,
  // source PE, token).
  int shrink_timeout_ms = 0;
  // Receive blocks (recv_blocks.hpp), each of recv_capacity rows, that a dispatch can return its
  // rows in (DispatchOutputs::recv_block); 0: none.
  int recv_blocks = 0;
  // > 0: a receive block holds each local expert's rows in a run of this many rows (local expert
  // e's from row e x this, the rest of its run untouched), as DeepEP's low-latency results lay
  // them out; at least max_tokens_per_pe x PEs (a token names an expert once). A combine takes
  // its x packed, so never reads such a block in place. The receive window stays packed.
  int recv_block_expert_rows = 0;
};
inline constexpr int kMaxRecvBlocks = 64;

// What this PE says of a call before any data moves, told to every PE in the call's first step.
enum class CallVerdict {
  kProceed,
  kRefuse,  // the caller found its inputs wrong: every PE's call is refused, naming this PE
  kRetry,   // the caller needs another operator (a larger one, another shape): no PE moves any
            // data and every PE's dispatch returns kDispatchRetry, so all can switch together
};

// dispatch's result on every PE when some PE's verdict was kRetry.
inline constexpr int kDispatchRetry = -1;

struct DispatchArgs {
  const void* x = nullptr;                   // [bs, hidden] of dtype
  const std::int32_t* expert_ids = nullptr;  // [bs, topk]; -1 = no expert
  const float* expert_scales = nullptr;      // [bs, topk] or null; travels with each row
  int bs = 0;
  const void* token_side = nullptr;             // [bs, config.token_side_bytes]; null when 0
  const std::int32_t* header_ints = nullptr;    // [config.header_ints]; null when 0
  CallVerdict verdict = CallVerdict::kProceed;  // anything but kProceed reads no other input
  std::int32_t* pe_mask = nullptr;              // shrink mode: [n_pes], in and out
};

// Caller-provided outputs on the receiving PE; `expand_x` and `assist_info` must hold
// MoeBuffer::recv_capacity() rows. `expand_x` may be MoeBuffer::receive_window(): the rows are
// then not copied out but read where they landed (see there).
struct DispatchOutputs {
  void* expand_x = nullptr;               // [rows, hidden], grouped by local expert, then source PE
  std::int32_t* assist_info = nullptr;    // [rows, 3]: source PE, source token, top-k slot
  std::int32_t* ep_recv_count = nullptr;  // [L * n_pes]: inclusive prefix over (expert, source)
  std::int32_t* expert_token_nums = nullptr;  // [L]
  float* expand_scales = nullptr;             // [rows] or null
  void* expand_side = nullptr;                // [rows, token_side_bytes] or null
  std::int32_t* all_header_ints = nullptr;    // [n_pes, header_ints] or null
  std::int32_t* all_counts = nullptr;         // [n_pes source, n_pes destination, L] or null: every
                                              // PE's rows for every (PE, local expert)
  // Non-null (with expand_x null): the rows land in a free receive block, which the call takes
  // for the caller; it sets *recv_block to its index and *recv_block_x to its rows.
  std::int32_t* recv_block = nullptr;
  void** recv_block_x = nullptr;
};

struct CombineArgs {
  // The experts' outputs, in dispatch's expand_x layout; may be MoeBuffer::receive_window().
  const void* expand_x = nullptr;
  const std::int32_t* assist_info = nullptr;
  const std::int32_t* ep_recv_count = nullptr;
  const std::int32_t* expert_ids = nullptr;  // the routing of this PE's own tokens [bs, topk]
  const float* expert_scales = nullptr;      // [bs, topk]
  int bs = 0;
  void* x_out = nullptr;  // [bs, hidden]
  // The caller found its inputs wrong: every PE's combine is refused, naming this PE; no other
  // input is read.
  bool caller_refused = false;
  // x_out holds the fp32 sums [bs, hidden], not rounded to dtype (for a caller that adds a bias
  // before it rounds, as DeepEP's combine does).
  bool x_out_float32 = false;
  // A value (0..127) every PE must pass alike, or the call is refused on every PE: what a caller
  // decides after the call (such as whether a second operator runs) is then the same everywhere.
  int caller_mode = 0;
  std::int32_t* pe_mask = nullptr;  // shrink mode: [n_pes], in and out
};

// What the last operator call measured on this PE.
struct OpTiming {
  std::vector<double> worker_us;  // each worker, whole kernel
  double comm_us = 0;             // payload and control protocol only
  std::size_t bytes_sent = 0;     // payload bytes this PE put into peers' windows
  std::size_t bytes_via_copy_engine = 0;
  int rows_received = 0;
  // Per source PE: how long this PE waited for that PE's flags (SourceWaits), the row of the
  // wait matrix that names a slow PE.
  std::vector<double> source_wait_us;
};

class MoeBuffer {
 public:
  explicit MoeBuffer(const MoeConfig& config);  // collective
  ~MoeBuffer();                                 // collective
  MoeBuffer(const MoeBuffer&) = delete;
  MoeBuffer& operator=(const MoeBuffer&) = delete;

  const MoeConfig& config() const;
  int n_pes() const;
  int my_pe() const;
  std::size_t recv_capacity() const;
  const OpTiming& last_timing() const;
  // The receive window, [recv_capacity(), hidden]: where dispatch's rows land, in expand_x's
  // layout (as DeepEP's low-latency mode returns them). Dispatched with it as expand_x, the rows
  // are not copied out; the experts may then write their outputs over the rows in place, and a
  // combine called with it as expand_x on every PE has each PE's reduction read its tokens' rows
  // straight from the experts' windows, with no copy in between (where every PE maps every
  // other's heap; otherwise the rows are sent as from any buffer). Its rows are valid until the
  // next dispatch on this context, and must not be written while a combine runs.
  void* receive_window();
  // Symmetric heap bytes a context of this config takes on each of n_pes PEs.
  static std::size_t window_bytes(const MoeConfig& config, int n_pes);
  // Local: gives back a receive block a dispatch took for the caller (Refused if it is not held).
  void release_block(int block);
  // Local: how many receive blocks the caller holds.
  int held_blocks() const;

  struct State;
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

// Returns the rows this PE received, or kDispatchRetry (on every PE) when a PE's verdict was
// kRetry.
int dispatch_classic(MoeBuffer& ctx, const DispatchArgs& in, const DispatchOutputs& out);
void combine_classic(MoeBuffer& ctx, const CombineArgs& in);
// The same operators, with segments of at least config().doubleplane_threshold bytes that are
// larger than the average segment moved by the copy engine while the workers carry on.
int dispatch_doubleplane(MoeBuffer& ctx, const DispatchArgs& in, const DispatchOutputs& out);
void combine_doubleplane(MoeBuffer& ctx, const CombineArgs& in);
// Shrink mode: a barrier of the PEs `pe_mask` has live; masks those that do not arrive in time.
void sync_live(MoeBuffer& ctx, std::int32_t* pe_mask);
// Shrink mode: a barrier of every PE, masked ones included, that unmasks those that arrive within
// the bound (and masks the others) and brings them to the same call counters, so that a PE that
// was masked (stopped, then resumed) takes part in the calls again. `others` (at most 31
// shrink-mode contexts of the same PEs, the same on every PE) are brought to the same counters
// in the same step: one bounded wait for a layer of several contexts.
void rejoin(MoeBuffer& ctx, std::int32_t* pe_mask, const std::vector<MoeBuffer*>& others = {});

}  // namespace shmoe::moe
