// The extension's MoeBuffer: a shmoe::MoeBuffer with its shape and pools of host blocks for the
// arrays its calls return (moe.cpp binds it; moe_runtime.cpp runs its calls).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "common/block_pool.hpp"
#include "shmoe/moe.hpp"

namespace shmoe::python {

using BlockMemory = common::BlockMemory;
using BlockPool = common::BlockPool;

// One block, as Python sees it (buffer protocol); it goes back to its pool when the last array
// over it dies.
class HostBlock {
 public:
  explicit HostBlock(std::shared_ptr<BlockPool> pool)
      : pool_(std::move(pool)), data_(pool_->take()) {}
  ~HostBlock() { pool_->give(std::move(data_)); }
  HostBlock(const HostBlock&) = delete;
  HostBlock& operator=(const HostBlock&) = delete;
  py::buffer_info info() {
    return py::buffer_info(reinterpret_cast<std::uint8_t*>(data_.get()),
                           static_cast<py::ssize_t>(pool_->bytes()));
  }

 private:
  std::shared_ptr<BlockPool> pool_;
  BlockMemory data_;
};

// Receive blocks lent out as dispatch results (MoeConfig::recv_blocks): an array over a block
// owns it through a capsule, which gives it back when the last array over it goes. Once its
// buffer is closed a capsule gives nothing back (close left the memory allocated where a block
// was held anywhere).
class RecvBlockLender {
 public:
  RecvBlockLender(MoeBuffer* op, int blocks) : op_(op), blocks_(blocks) {}
  // Whether a dispatch now would find a free block.
  bool has_free() {
    const std::lock_guard lock(mutex_);
    return !retired_ && op_->held_blocks() < blocks_;
  }
  // The owner of block `block`, for the array over its rows.
  static py::capsule lend(const std::shared_ptr<RecvBlockLender>& self, int block);
  // The buffer is going: capsules from now on leave it alone.
  void retire() {
    const std::lock_guard lock(mutex_);
    retired_ = true;
  }

 private:
  std::mutex mutex_;  // capsules go on any thread that drops an array
  MoeBuffer* op_;
  int blocks_;
  bool retired_ = false;
};

// How a buffer's dispatches returned their rows: in a receive block, or copied out of the window.
struct ResultCounts {
  std::int64_t in_blocks = 0, copied = 0;
};

// A shmoe::MoeBuffer (closed collectively, see Collective) with its shape, a pool of host blocks
// for dispatch's received rows and, with recv_blocks, the lender of its receive blocks.
class Buffer : public Collective<MoeBuffer> {
 public:
  Buffer(const MoeConfig& c, std::size_t elem)
      : Collective(released([&] { return std::make_unique<MoeBuffer>(c); }),
                   "the MoE buffer is closed"),
        config_(c),
        elem_(elem),
        capacity_(get().recv_capacity()),
        rows_(std::make_shared<BlockPool>(capacity_ * row_bytes())),
        tokens_(std::make_shared<BlockPool>(static_cast<std::size_t>(c.max_tokens_per_pe) *
                                            row_bytes())) {
    if (c.recv_blocks > 0) lender_ = std::make_shared<RecvBlockLender>(&get(), c.recv_blocks);
  }

  std::size_t capacity() const { return capacity_; }
  std::size_t row_bytes() const { return static_cast<std::size_t>(config_.hidden) * elem_; }
  int num_topk() const { return config_.num_topk; }
  int num_experts_per_pe() const { return config_.num_experts_per_pe; }
  int hidden() const { return config_.hidden; }
  std::size_t token_side_bytes() const {
    return static_cast<std::size_t>(config_.token_side_bytes);
  }
  std::size_t header_ints() const { return static_cast<std::size_t>(config_.header_ints); }
  std::size_t max_tokens_per_pe() const {
    return static_cast<std::size_t>(config_.max_tokens_per_pe);
  }
  std::unique_ptr<HostBlock> take_rows() const { return std::make_unique<HostBlock>(rows_); }
  std::unique_ptr<HostBlock> take_token_rows() const {
    return std::make_unique<HostBlock>(tokens_);
  }
  // Null without receive blocks.
  const std::shared_ptr<RecvBlockLender>& lender() const { return lender_; }
  ResultCounts& result_counts() { return counts_; }
  const ResultCounts& result_counts() const { return counts_; }

  // Collective. Where any PE's caller still holds a receive block, every PE gives the buffer up
  // instead of freeing it (its symmetric memory stays allocated, and the held rows stay valid).
  void close();
  void abandon() {
    if (lender_) lender_->retire();
    Collective::abandon();
  }

 private:
  MoeConfig config_;
  std::size_t elem_;
  std::size_t capacity_;
  std::shared_ptr<BlockPool> rows_;    // blocks of recv_capacity rows
  std::shared_ptr<BlockPool> tokens_;  // blocks of max_tokens_per_pe rows (combine's output)
  std::shared_ptr<RecvBlockLender> lender_;
  ResultCounts counts_;
};

// A Buffer of this shape (moe.cpp; the binding's MoeBuffer constructor and MoeRuntime's
// operators): dtype is int32, float16, bfloat16 or float32.
std::unique_ptr<Buffer> make_buffer(int num_experts_per_pe, int max_tokens_per_pe, int hidden,
                                    int num_topk, const std::string& dtype,
                                    std::size_t max_recv_rows, int matrix_workers,
                                    int vector_workers, std::size_t double_plane_threshold,
                                    int token_side_bytes, int header_ints, int shrink_timeout_ms,
                                    int recv_blocks);

}  // namespace shmoe::python
