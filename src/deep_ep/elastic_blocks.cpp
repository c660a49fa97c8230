#include "deep_ep/elastic_blocks.hpp"

#include <shmem.h>

#include <algorithm>
#include <stdexcept>

namespace shmoe::deep_ep {

ElasticBlocks::ElasticBlocks(std::uint64_t bytes, std::uint64_t room, const char* call)
    : bytes_(bytes) {
  const std::size_t free = largest_free(call);
  count_ = free <= room ? 0 : blocks_within(free - room, bytes);
  if (count_ > 0) {
    base_ = static_cast<std::byte*>(shmem_malloc(static_cast<std::size_t>(count_) * bytes));
    // The same on every PE: every heap has had the same allocations.
    if (base_ == nullptr) count_ = 0;
  }
  held_.assign(static_cast<std::size_t>(count_), false);
  lender_ = std::make_shared<BlockLender>(
      count_, [this] { return held(); }, [this](int b) { give(b); });
}

ElasticBlocks::~ElasticBlocks() {
  if (count_ == 0) {
    lender_->retire();
    return;
  }
  bool held_anywhere = true;
  try {
    held_anywhere = most(held()) > 0;
  } catch (const std::runtime_error&) {
    // No room for the reduction (alike on every PE): leave the blocks as if one were held.
  }
  lender_->retire();
  if (!held_anywhere) shmem_free(base_);
}

int ElasticBlocks::take() {
  std::lock_guard lock(mutex_);
  const auto free = std::find(held_.begin(), held_.end(), false);
  if (free == held_.end()) return -1;
  *free = true;
  return static_cast<int>(free - held_.begin());
}

void ElasticBlocks::give(int b) {
  std::lock_guard lock(mutex_);
  held_.at(static_cast<std::size_t>(b)) = false;
}

int ElasticBlocks::held() {
  std::lock_guard lock(mutex_);
  return static_cast<int>(std::count(held_.begin(), held_.end(), true));
}

}  // namespace shmoe::deep_ep
