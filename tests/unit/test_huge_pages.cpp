// common/huge_pages: buffers of 2 MiB and more start on a 2 MiB boundary and are marked for
// transparent huge pages (the "hg" flag of their mapping, where the kernel has them); smaller
// ones start on a cache line; every byte is usable and kept; sizes that cannot fit are refused.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <fstream>
#include <new>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/huge_pages.hpp"

namespace shmoe {
namespace {

// The VmFlags line of the mapping that holds p, from /proc/self/smaps ("" if none does).
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// Whether this kernel takes MADV_HUGEPAGE at all (not where transparent huge pages are compiled
// out); asked of a mapping of our own.
bool kernel_takes_madv_hugepage() {
  const std::size_t size = kHugePageBytes;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  const bool ok = ::madvise(p, size, MADV_HUGEPAGE) == 0;
  ::munmap(p, size);
  return ok;
}

TEST(HugePages, LargeBuffersStartOnA2MiBBoundaryAndKeepEveryByte) {
  std::mt19937_64 rng(std::random_device{}());
  // Exactly one huge page, a partial last page, and a size that is not a multiple of 4 KiB.
  for (const std::size_t bytes :
       {kHugePageBytes, 3 * kHugePageBytes + 4096, 5 * kHugePageBytes + 77}) {
    auto* p = static_cast<std::uint8_t*>(allocate_huge_pages(bytes));
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % kHugePageBytes, 0u) << bytes;
    const std::uint64_t seed = rng();
    for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>((i * 131 + seed) >> 3);
    for (std::size_t i = 0; i < bytes; ++i) {
      ASSERT_EQ(p[i], static_cast<std::uint8_t>((i * 131 + seed) >> 3)) << bytes << " at " << i;
    }
    if (kernel_takes_madv_hugepage()) {
      EXPECT_NE(vm_flags_of(p).find(" hg"), std::string::npos) << vm_flags_of(p);
    }
    release_huge_pages(p, bytes);
    EXPECT_EQ(vm_flags_of(p), "") << "the mapping outlived its release";
  }
}

TEST(HugePages, SmallBuffersStartOnACacheLine) {
  for (const std::size_t bytes : {std::size_t{1}, std::size_t{4095}, kHugePageBytes - 1}) {
    void* p = allocate_huge_pages(bytes);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u) << bytes;
    static_cast<std::uint8_t*>(p)[bytes - 1] = 7;
    release_huge_pages(p, bytes);
  }
}

TEST(HugePages, AVectorWithTheAllocatorHoldsItsValues) {
  std::vector<std::uint32_t, HugePageAllocator<std::uint32_t>> v(kHugePageBytes, 0);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.data()) % kHugePageBytes, 0u);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint32_t>(i * 2654435761u);
  const auto moved = std::move(v);
  for (std::size_t i = 0; i < moved.size(); ++i) {
    ASSERT_EQ(moved[i], static_cast<std::uint32_t>(i * 2654435761u)) << i;
  }
}

TEST(HugePages, SizesThatCannotFitAreRefused) {
  HugePageAllocator<std::uint64_t> a;
  EXPECT_THROW((void)a.allocate(SIZE_MAX / 4), std::bad_array_new_length);
  EXPECT_THROW((void)allocate_huge_pages(SIZE_MAX), std::bad_alloc);
  EXPECT_THROW((void)allocate_huge_pages(SIZE_MAX - 4096), std::bad_alloc);
  EXPECT_THROW((void)allocate_huge_pages(std::size_t{1} << 62), std::bad_alloc);
}

}  // namespace
}  // namespace shmoe
