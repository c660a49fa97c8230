// A call's results (shmoe_ep_result_t of shmoe/elastic.h): named arrays over memory the result
// owns, reference counted across the C API, and what a later call needs of the dispatch that
// made it (its routing, for a cached dispatch and for combine).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/block_pool.hpp"
#include "shmoe/moe.hpp"
#include "shmoe/tensor.h"

namespace shmoe::deep_ep {

// One array of a result: its description and the memory it lives in.
struct Array {
  std::string name;
  shmoe_tensor_t tensor{};
  std::shared_ptr<std::byte[]> memory;
};

std::size_t dtype_bytes(shmoe_dtype_t t);

// Where a buffer's results live: blocks of a few size classes, reused once no result holds them
// (a result may outlive its buffer: each block keeps its pool).
class ArrayMemory {
 public:
  std::shared_ptr<std::byte[]> take(std::size_t bytes);

 private:
  std::mutex mutex_;
  std::map<std::size_t, std::shared_ptr<common::BlockPool>> pools_;  // by size class
};

// The receive blocks of one dispatch operator (or of an ElasticBuffer's pool: elastic_blocks.hpp),
// lent out as results' memory (docs/deep_ep.md, "Results with no copy"). An array over a block
// owns it through its memory's deleter, which gives the block back when the last tensor over it
// goes; while any is out the heap stays mapped past shmem_finalize. Once the owner is retired a
// deleter gives nothing back: the runtime abandoned that owner's memory (left it allocated and
// mapped) rather than free held blocks.
class BlockLender {
 public:
  // `op` has `blocks` receive blocks.
  BlockLender(MoeBuffer* op, int blocks);
  // An owner of `blocks` blocks, which counts those held and takes one back.
  BlockLender(int blocks, std::function<int()> held, std::function<void(int)> give_back);
  // Memory over block `block` of the operator (its rows at `rows`), given back when it goes.
  static std::shared_ptr<std::byte[]> lend(const std::shared_ptr<BlockLender>& self, int block,
                                           void* rows);
  // Whether a dispatch now would find a free block.
  bool has_free();
  int blocks() const { return blocks_; }
  // The owner is going (or abandoned): deleters from now on leave it alone.
  void retire();

 private:
  void give_back(int block);

  std::mutex mutex_;  // deleters run on any thread
  bool retired_ = false;
  const int blocks_;
  std::function<int()> held_;
  std::function<void(int)> give_back_;
};

// The most any rank passes (collective).
std::int64_t most(std::int64_t mine);

// Receive blocks for a dispatch operator of config `c` on n ranks: SHMOE_DEEP_EP_RECV_BLOCKS,
// fewer where they would take more than half the heap left after the operator (the other
// operators need room too). Every rank's heap has had the same allocations, so every rank gets
// the same count. `call` names the caller should shmoe not be initialized.
int blocks_that_fit(MoeConfig c, int n, const char* call);
// The same for blocks of `block` bytes beside `base` bytes still to be allocated.
int blocks_that_fit(std::size_t base, std::size_t block, const char* call);
// The largest free run of this PE's heap (the same on every PE that made the same allocations).
std::size_t largest_free(const char* call);
// SHMOE_DEEP_EP_RECV_BLOCKS, or fewer: as many blocks of `block` bytes as `bytes` holds.
int blocks_within(std::size_t bytes, std::size_t block);

// Collective where op has blocks (the same count on every rank), before `op` goes: retires
// `lender`, and if any rank's caller still holds a block of op's, every rank abandons op (its
// window stays allocated and mapped) instead of freeing it.
void retire_blocks(MoeBuffer& op, BlockLender& lender);

// How a buffer's dispatches returned their rows: in a receive block (no copy), or copied out.
struct ResultCounts {
  void count(bool in_block) { ++(in_block ? in_blocks : copied); }
  // The C API's result_counts: each count where the caller gives room for it.
  void report(std::int64_t* in_blocks_out, std::int64_t* copied_out) const {
    if (in_blocks_out != nullptr) *in_blocks_out = in_blocks;
    if (copied_out != nullptr) *copied_out = copied;
  }
  std::atomic<std::int64_t> in_blocks{0}, copied{0};
};

// Where one dispatch's rows land: a free receive block of the lender's operator, written there by
// their senders (no copy), when the call may (`eligible`: it goes through that operator, in a
// block's layout) and a block is free; otherwise where its caller says.
class Landing {
 public:
  Landing(std::shared_ptr<BlockLender> lender, bool eligible)
      : lender_(std::move(lender)), direct_(eligible && lender_ && lender_->has_free()) {}
  bool direct() const { return direct_; }
  // Aims the operator's dispatch at a block, or else at `otherwise`.
  void aim(DispatchOutputs& outs, void* otherwise);
  // Once the dispatch returned `got` rows (not kRetry: counted): the block's memory, which owns
  // it (null when the rows went elsewhere).
  std::shared_ptr<std::byte[]> lend(int got, ResultCounts& counts);

 private:
  std::shared_ptr<BlockLender> lender_;
  const bool direct_;
  std::int32_t block_ = -1;
  void* rows_ = nullptr;
};

// What a dispatch knows of its routing, kept by its result for a cached dispatch and combine.
struct Routing {
  int num_tokens = 0, num_topk = 0, num_experts = 0, num_max_tokens_per_rank = 0;
  int expert_alignment = 1;
  bool do_expand = false, do_cpu_sync = true;
  std::int64_t x_row_bytes = 0, sf_row_bytes = 0, sf_cols = 0;
  shmoe_dtype_t x_dtype = SHMOE_DTYPE_BFLOAT16, sf_dtype = SHMOE_DTYPE_FLOAT32;
  std::vector<std::int32_t> topk_idx;  // [num_tokens][num_topk], global experts or -1
  // Received tokens, in receive order: source rank and its token index, and per top-k slot the
  // local expert (or -1) and, in expand mode, the expanded row (or -1).
  std::vector<std::int32_t> src_rank, src_token, local_expert, expanded_row;
  std::int64_t num_recv_tokens = 0, num_expanded_tokens = 0;
  std::int64_t recv_rows = 0, expanded_rows = 0;  // the arrays' rows (worst case without sync)
  const void* buffer = nullptr;                   // the ElasticBuffer that dispatched
  std::uint64_t epoch = 0;                        // the buffer's epoch then (see ElasticBuffer)
};

class Result {
 public:
  // The memory later arrays come from (fresh allocations until set).
  void use(std::shared_ptr<ArrayMemory> memory) { memory_ = std::move(memory); }
  // A fresh array of `shape` (C-contiguous), zeroed when `zero`.
  shmoe_tensor_t& add(const std::string& name, shmoe_dtype_t dtype,
                      std::initializer_list<std::int64_t> shape, bool zero = false);
  // A fresh [rows, cols] array stored column-major with rows padded to `row_align`.
  shmoe_tensor_t& add_column_major(const std::string& name, shmoe_dtype_t dtype, std::int64_t rows,
                                   std::int64_t cols, std::int64_t row_align, bool zero = false);
  // An array of `shape` (C-contiguous) at `data` inside `memory`, which the result keeps: memory
  // a runtime reuses between calls (ArrayMemory).
  shmoe_tensor_t& add_over(const std::string& name, shmoe_dtype_t dtype,
                           std::initializer_list<std::int64_t> shape,
                           std::shared_ptr<std::byte[]> memory, void* data);
  const shmoe_tensor_t* find(const std::string& name) const;
  const std::deque<Array>& arrays() const { return arrays_; }

  std::shared_ptr<Routing> routing;  // set by a (non-cached) dispatch
  bool cached = false;               // made by a cached dispatch
  std::shared_ptr<void> state;       // what another runtime's later calls need of this call

  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Drops a reference; true when it was the last.
  bool release() { return refs_.fetch_sub(1, std::memory_order_acq_rel) == 1; }

 private:
  Array fresh(const std::string& name, shmoe_dtype_t dtype, std::int64_t elements, bool zero);

  std::shared_ptr<ArrayMemory> memory_;
  std::deque<Array> arrays_;  // a deque: add() returns references that later adds keep valid
  std::atomic<int> refs_{1};
};

}  // namespace shmoe::deep_ep

// The C API's result handle is the result itself.
struct shmoe_ep_result final : shmoe::deep_ep::Result {};
