#include "common/huge_pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace shmoe {
namespace {

// A cache line, so that no aligned 64-byte load straddles two.
constexpr std::align_val_t kSmallAlignment{64};

std::size_t round_up(std::size_t bytes, std::size_t to) {
  return (bytes + to - 1) / to * to;
}

std::size_t page_bytes() {
  static const auto kPage = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return kPage;
}

}  // namespace

void* allocate_huge_pages(std::size_t bytes) {
  if (bytes < kHugePageBytes) return ::operator new(bytes, kSmallAlignment);
  // Refused before any rounding can wrap around.
  if (bytes > std::numeric_limits<std::size_t>::max() - 2 * kHugePageBytes) throw std::bad_alloc();
  const std::size_t size = round_up(bytes, page_bytes());
  // Map a huge page more than asked for, then unmap what lies before the first 2 MiB boundary
  // and after the buffer: the mapping keeps exactly the buffer, and its whole 2 MiB spans can be
  // huge pages (the last partial one stays in small pages).
  const std::size_t mapped = size + kHugePageBytes;
  void* raw = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = round_up(start, kHugePageBytes);
  if (aligned > start) ::munmap(raw, aligned - start);
  const std::size_t tail = start + mapped - (aligned + size);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + size), tail);
  // Before the first touch, so the faults themselves take huge pages. Refused (EINVAL) where the
  // kernel has no transparent huge pages: then small pages serve, which is still correct.
  ::madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

void release_huge_pages(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes < kHugePageBytes) return ::operator delete(p, kSmallAlignment);
  ::munmap(p, round_up(bytes, page_bytes()));
}

}  // namespace shmoe
