// Best-fit allocator over a range of offsets, with coalescing on free. It hands out offsets, not
// pointers, so the same sequence of calls gives the same offsets on every PE: that is what makes
// the heap symmetric.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

namespace shmoe::heap {

class BestFitAllocator {
 public:
  static constexpr std::size_t kGranularity = 16;

  explicit BestFitAllocator(std::size_t capacity);

  // nullopt when no free block can hold `size` at `alignment` (a power of two, >= 1).
  // A zero size is rounded up to one granule so every allocation has a distinct offset.
  // `origin` is the address of offset 0: the offset returned makes origin + offset a multiple
  // of `alignment`, so an alignment beyond the origin's own holds for the address, not only
  // for the offset. origin % alignment must be a multiple of kGranularity (else nullopt).
  std::optional<std::size_t> allocate(std::size_t size, std::size_t alignment = kGranularity,
                                      std::uintptr_t origin = 0);
  // Returns false (and changes nothing) if `offset` is not the start of a live allocation.
  bool release(std::size_t offset);
  // Size of the live allocation at `offset` (rounded to the granularity), or nullopt.
  std::optional<std::size_t> allocation_size(std::size_t offset) const;
  // The live allocation (start, size) that holds [offset, offset + bytes), or nullopt.
  std::optional<std::pair<std::size_t, std::size_t>> allocation_holding(std::size_t offset,
                                                                        std::size_t bytes) const;

  std::size_t capacity() const { return capacity_; }
  std::size_t free_bytes() const { return free_bytes_; }
  std::size_t largest_free_block() const;
  std::size_t live_allocations() const { return used_.size(); }

 private:
  void insert_free(std::size_t offset, std::size_t size);
  void erase_free(std::map<std::size_t, std::size_t>::iterator it);

  std::size_t capacity_;
  std::size_t free_bytes_ = 0;
  std::map<std::size_t, std::size_t> free_by_offset_;     // offset -> size
  std::multimap<std::size_t, std::size_t> free_by_size_;  // size -> offset
  std::map<std::size_t, std::size_t> used_;               // offset -> size
};

}  // namespace shmoe::heap
