// An ElasticBuffer's receive blocks (docs/deep_ep.md, "Results with no copy"): symmetric memory
// that a dispatch's senders write recv_x's rows into, lent to the results by a BlockLender.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "deep_ep/result.hpp"

namespace shmoe::deep_ep {

class ElasticBlocks {
 public:
  // Collective: SHMOE_DEEP_EP_RECV_BLOCKS blocks of `bytes`, fewer where the heap left, less
  // `room` (for the buffer's primitives), holds fewer (the same count on every PE).
  ElasticBlocks(std::uint64_t bytes, std::uint64_t room, const char* call);
  ElasticBlocks(const ElasticBlocks&) = delete;
  ElasticBlocks& operator=(const ElasticBlocks&) = delete;
  // Collective: frees the blocks, unless some PE's caller still holds one: then every PE leaves
  // them allocated and mapped (until the process ends), so held rows still read right.
  ~ElasticBlocks();

  int count() const { return count_; }
  std::uint64_t bytes() const { return bytes_; }
  // Block `b`'s local address (symmetric: the same offset on every PE).
  std::byte* block(int b) const { return base_ + static_cast<std::uint64_t>(b) * bytes_; }
  // A free block, now held (local); -1 when all are held.
  int take();
  // Gives back a block take() returned that no result holds.
  void give(int b);
  const std::shared_ptr<BlockLender>& lender() const { return lender_; }

 private:
  int held();

  std::uint64_t bytes_ = 0;
  int count_ = 0;
  std::byte* base_ = nullptr;
  std::mutex mutex_;  // results give blocks back on any thread
  std::vector<bool> held_;
  std::shared_ptr<BlockLender> lender_;
};

}  // namespace shmoe::deep_ep
