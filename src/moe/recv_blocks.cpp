#include "moe/recv_blocks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace shmoe::moe {

RecvBlocks::RecvBlocks(std::byte* base, std::size_t block_bytes, int count,
                       std::vector<std::byte*> peer_base)
    : base_(base),
      bytes_(block_bytes),
      count_(count),
      held_(static_cast<std::size_t>(count), false),
      peer_base_(std::move(peer_base)) {}

int RecvBlocks::held() const {
  std::lock_guard lock(*mutex_);
  return static_cast<int>(std::count(held_.begin(), held_.end(), true));
}

int RecvBlocks::take() {
  std::lock_guard lock(*mutex_);
  const auto free = std::find(held_.begin(), held_.end(), false);
  if (free == held_.end()) return -1;
  *free = true;
  return static_cast<int>(free - held_.begin());
}

std::string RecvBlocks::release(int block, const char* fn) {
  if (block < 0 || block >= count()) {
    return fmt::format("{}: block={} is out of range (0..{}, the buffer's recv_blocks={})", fn,
                       block, count() - 1, count());
  }
  std::lock_guard lock(*mutex_);
  if (!held_[static_cast<std::size_t>(block)])
    return fmt::format("{}: block={} is not held (released already, or never taken)", fn, block);
  held_[static_cast<std::size_t>(block)] = false;
  return "";
}

std::byte* RecvBlocks::peer_rows(int pe, int block) const {
  std::byte* at = peer_base_[static_cast<std::size_t>(pe)];
  return at == nullptr ? nullptr : at + static_cast<std::size_t>(block) * bytes_;
}

}  // namespace shmoe::moe
