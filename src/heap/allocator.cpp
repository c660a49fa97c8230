#include "heap/allocator.hpp"

#include <iterator>

namespace shmoe::heap {
namespace {
constexpr std::size_t round_up(std::size_t v, std::size_t a) {
  return (v + a - 1) / a * a;
}
}  // namespace

BestFitAllocator::BestFitAllocator(std::size_t capacity)
    : capacity_(capacity / kGranularity * kGranularity) {
  if (capacity_ > 0) insert_free(0, capacity_);
}

void BestFitAllocator::insert_free(std::size_t offset, std::size_t size) {
  free_by_offset_.emplace(offset, size);
  free_by_size_.emplace(size, offset);
  free_bytes_ += size;
}

void BestFitAllocator::erase_free(std::map<std::size_t, std::size_t>::iterator it) {
  auto [first, last] = free_by_size_.equal_range(it->second);
  for (auto s = first; s != last; ++s) {
    if (s->second == it->first) {
      free_by_size_.erase(s);
      break;
    }
  }
  free_bytes_ -= it->second;
  free_by_offset_.erase(it);
}

std::optional<std::size_t> BestFitAllocator::allocate(std::size_t size, std::size_t alignment,
                                                      std::uintptr_t origin) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) return std::nullopt;
  if (size > capacity_) return std::nullopt;
  alignment = alignment < kGranularity ? kGranularity : alignment;
  // Offsets congruent to -origin modulo `alignment` are the aligned addresses.
  const std::size_t shift = origin % alignment;
  if (shift % kGranularity != 0) return std::nullopt;
  const std::size_t need = round_up(size == 0 ? 1 : size, kGranularity);
  // Smallest block first; a block may still be too small once its start is aligned up.
  for (auto s = free_by_size_.lower_bound(need); s != free_by_size_.end(); ++s) {
    const std::size_t block_off = s->second;
    const std::size_t block_size = s->first;
    const std::size_t start = round_up(block_off + shift, alignment) - shift;
    if (start - block_off + need > block_size) continue;
    erase_free(free_by_offset_.find(block_off));
    if (start > block_off) insert_free(block_off, start - block_off);
    const std::size_t tail = block_off + block_size - (start + need);
    if (tail > 0) insert_free(start + need, tail);
    used_.emplace(start, need);
    return start;
  }
  return std::nullopt;
}

bool BestFitAllocator::release(std::size_t offset) {
  auto u = used_.find(offset);
  if (u == used_.end()) return false;
  std::size_t start = offset;
  std::size_t size = u->second;
  used_.erase(u);
  auto next = free_by_offset_.lower_bound(start);
  if (next != free_by_offset_.end() && next->first == start + size) {
    size += next->second;
    erase_free(next);
  }
  auto after = free_by_offset_.lower_bound(start);
  if (after != free_by_offset_.begin()) {
    auto prev = std::prev(after);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      erase_free(prev);
    }
  }
  insert_free(start, size);
  return true;
}

std::optional<std::size_t> BestFitAllocator::allocation_size(std::size_t offset) const {
  auto u = used_.find(offset);
  if (u == used_.end()) return std::nullopt;
  return u->second;
}

std::optional<std::pair<std::size_t, std::size_t>> BestFitAllocator::allocation_holding(
    std::size_t offset, std::size_t bytes) const {
  auto u = used_.upper_bound(offset);
  if (u == used_.begin()) return std::nullopt;
  --u;
  const auto [start, size] = *u;
  if (offset - start > size || bytes > size - (offset - start)) return std::nullopt;
  return std::pair{start, size};
}

std::size_t BestFitAllocator::largest_free_block() const {
  return free_by_size_.empty() ? 0 : std::prev(free_by_size_.end())->first;
}

}  // namespace shmoe::heap
