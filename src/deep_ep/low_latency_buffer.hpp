// The LowLatencyBuffer (shmoe/deep_ep.h): DeepEP V1's low-latency mode over shmoe's MoE operators
// with the real experts. Each shape's operators are LowLatencyAreas; a call checks its arguments
// locally, agrees on them (refused on every rank, or on none), moves the rows and builds DeepEP's
// outputs (low_latency_dispatch.cpp, low_latency_combine.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "deep_ep/result.hpp"
#include "shmoe/deep_ep.h"
#include "shmoe/moe.hpp"

namespace shmoe::deep_ep {

constexpr int kFp8Block = 128;  // channels per FP8 scale

// num_max_dispatch_tokens_per_rank, hidden, num_experts, num_topk.
struct LowLatencyShape {
  int max_tokens = 0, hidden = 0, experts = 0, topk = 0;
  auto key() const { return std::tie(max_tokens, hidden, experts, topk); }
  bool operator<(const LowLatencyShape& o) const { return key() < o.key(); }
};

// The operators of one shape: BF16 rows (dispatch and combine) and FP8 message rows (int32 units,
// made at the first FP8 dispatch), with what a call stages in them.
class LowLatencyAreas {
 public:
  // shrink_ms > 0: shrink-mode operators (fixed slots, masks; FP8 message rows travel inside the
  // BF16 rows, as one operator's combine must follow its own dispatch).
  LowLatencyAreas(const LowLatencyShape& s, int n, int shrink_ms);
  LowLatencyAreas(const LowLatencyAreas&) = delete;
  LowLatencyAreas& operator=(const LowLatencyAreas&) = delete;
  ~LowLatencyAreas();
  MoeBuffer& fp8();
  void abandon();
  // Collective, before the areas go: frees bf16, or abandons it while a rank holds a block.
  void retire();
  std::size_t fp8_row_bytes() const { return fp8_row_bytes_; }

  const LowLatencyShape shape;
  const int n, local_experts, slots, shrink_ms;
  std::unique_ptr<MoeBuffer> bf16;
  // Lends bf16's receive blocks, each a BF16 dispatch's recv_x [local experts, slots, hidden] as
  // its senders wrote it (no copy; none in shrink mode).
  std::shared_ptr<BlockLender> lender;
  std::vector<std::uint16_t> wide;     // shrink mode: [max tokens, hidden], FP8 rows at the head
  std::vector<std::uint16_t> staged;   // shrink mode: [recv capacity, hidden] received or combined
  std::vector<std::uint8_t> messages;  // [max tokens, FP8 row bytes]
  std::shared_ptr<std::byte[]> combine_input;  // [local experts, slots, hidden] bfloat16
  std::vector<double> waits;

 private:
  MoeConfig config(int hidden, shmoe_dtype_t dtype) const;
  std::size_t fp8_row_bytes_;
  std::unique_ptr<MoeBuffer> fp8_;
  bool abandoned_ = false;
};

// What a dispatch keeps for its combine (its result's state).
struct LowLatencyRouting {
  const void* buffer = nullptr;
  LowLatencyAreas* areas = nullptr;
  int tokens = 0, topk = 0, rows = 0;
  int call_topk = 0;                        // the call's (shrink mode pads topk_idx with -1)
  std::vector<std::int32_t> topk_idx;       // [tokens, topk]
  std::vector<std::int32_t> src_info;       // [rows, 3]
  std::vector<std::int32_t> layout_prefix;  // [local experts * n]
  std::vector<std::int32_t> counts;         // [local experts]
};

// Shrink mode: the experts per token a shape's operators hold (room for DeepEP's limit of 11, so
// that the operators made up front serve every call; more only for a call that passes more).
int shrink_area_topk(int experts, int topk);
// SHMOE_SHRINK_TIMEOUT_MS, checked (default 10000).
int shrink_timeout_ms(const char* text);

class LowLatencyBuffer {
 public:
  explicit LowLatencyBuffer(const shmoe_low_latency_buffer_config_t& config);
  LowLatencyBuffer(const LowLatencyBuffer&) = delete;
  LowLatencyBuffer& operator=(const LowLatencyBuffer&) = delete;
  ~LowLatencyBuffer();  // collective unless abandoned

  void abandon();
  shmoe_ep_result* dispatch(const shmoe_low_latency_dispatch_args_t& args);
  shmoe_ep_result* combine(const shmoe_low_latency_combine_args_t& args);
  shmoe_tensor_t next_combine_buffer(const shmoe_ep_result* handle);
  void clean(int max_tokens, int hidden, int experts, const char* refusal);
  // Shrink mode (low_latency_shrink.cpp).
  void update_mask(int rank, bool mask);
  void query_mask(const shmoe_tensor_t& mask_status) const;
  void clean_mask();
  bool shrink() const { return shrink_ms_ > 0; }
  std::int32_t* mask() { return mask_.data(); }
  bool any_masked() const;

  int num_ranks() const { return n_; }
  // The areas of `s`, made (collectively: every rank asks for the same shape) at first use;
  // refused in shrink mode while a rank is masked.
  LowLatencyAreas& areas(const LowLatencyShape& s, const char* call);
  // handle's routing when a dispatch of this buffer returned it, else nullptr.
  const LowLatencyRouting* routing(const shmoe_ep_result* handle) const;
  // Where results' arrays live (reused once no result holds them).
  const std::shared_ptr<ArrayMemory>& memory() const { return memory_; }
  // Its dispatches' recv_x: in a receive block (no copy) or copied out.
  ResultCounts& counts() { return counts_; }

 private:
  void start_shrink(const shmoe_low_latency_buffer_config_t& config);
  void barrier();

  int n_ = 0, me_ = 0, shrink_ms_ = 0;
  std::vector<std::int32_t> mask_;
  // Since the last clean: the ranks unmasked by hand, and whether the whole mask was cleared;
  // either makes the next clean a rejoin.
  std::set<int> unmasked_;
  bool cleared_ = false;
  std::unique_ptr<MoeBuffer> sync_;  // shrink mode: the live ranks' barrier
  std::map<LowLatencyShape, std::unique_ptr<LowLatencyAreas>> areas_;
  std::shared_ptr<ArrayMemory> memory_ = std::make_shared<ArrayMemory>();
  ResultCounts counts_;
  bool abandoned_ = false;
};

}  // namespace shmoe::deep_ep
