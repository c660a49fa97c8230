// Memory for large buffers that kernels stream through on every call (MX FP8 expert weights):
// placed on 2 MiB boundaries and marked for transparent huge pages, so that reading it needs one
// page-table entry per 2 MiB instead of one per 4 KiB. The FP8 kernel at one row of activations
// reads a 4 KiB page in about 0.15 us, and its reads out of cache went from 20-21 to 26-27 GB/s
// on such memory (DeepSeek-V2-Lite's GEMM1 and GEMM2 weights, 41 MB, AMD EPYC VM, huge pages on
// request: `madvise`). oneDNN's bf16 kernel on its packed weights gained nothing from them, so
// those stay in oneDNN's own memory. Where the system grants no huge pages (disabled, or none
// free) the buffer is ordinary pages, with the same contents.
#pragma once

#include <cstddef>
#include <limits>
#include <new>

namespace shmoe {

// Below this a buffer cannot hold a huge page, and comes from operator new (on a 64-byte line).
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// `bytes` of memory starting on a 2 MiB boundary (below kHugePageBytes: a 64-byte one); throws
// std::bad_alloc if there is none. Release with release_huge_pages and the same size.
void* allocate_huge_pages(std::size_t bytes);
void release_huge_pages(void* p, std::size_t bytes) noexcept;

// For std::vector<T, HugePageAllocator<T>>.
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}  // NOLINT: as std::allocator
  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(allocate_huge_pages(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { release_huge_pages(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace shmoe
