#include <gtest/gtest.h>

#include <map>
#include <random>

#include "heap/allocator.hpp"

namespace shmoe::heap {
namespace {

TEST(BestFit, PicksTheSmallestBlockThatFits) {
  BestFitAllocator a(1024);
  auto x = a.allocate(100);  // 112 after rounding
  auto y = a.allocate(16);
  auto z = a.allocate(200);
  ASSERT_TRUE(x && y && z);
  ASSERT_TRUE(a.release(*x));  // hole of 112 at 0
  auto w = a.allocate(48);     // the 112-byte hole beats the big tail
  ASSERT_TRUE(w);
  EXPECT_EQ(*w, *x);
}

TEST(BestFit, CoalescesNeighbours) {
  BestFitAllocator a(4096);
  auto x = a.allocate(1000), y = a.allocate(1000), z = a.allocate(1000);
  ASSERT_TRUE(x && y && z);
  a.release(*x);
  a.release(*z);
  a.release(*y);
  EXPECT_EQ(a.free_bytes(), 4096u);
  EXPECT_EQ(a.largest_free_block(), 4096u);
  EXPECT_EQ(a.live_allocations(), 0u);
}

TEST(BestFit, HonoursAlignmentAndExhaustion) {
  BestFitAllocator a(1 << 20);
  ASSERT_TRUE(a.allocate(24));
  auto p = a.allocate(10, 4096);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p % 4096, 0u);
  EXPECT_FALSE(a.allocate(2 << 20));
  EXPECT_FALSE(a.allocate(8, 3));  // not a power of two
  EXPECT_FALSE(a.release(12345));  // not an allocation
}

// The alignment holds for origin + offset, where origin is the address of offset 0: a heap
// mapped at a page boundary that is not 64 KiB-aligned still yields 64 KiB-aligned addresses.
TEST(BestFit, AlignsTheAddressNotOnlyTheOffset) {
  for (std::uintptr_t origin : {std::uintptr_t{0x7f0000001000}, std::uintptr_t{0x7f000000f000},
                                std::uintptr_t{0x7f0000010000}}) {
    BestFitAllocator a(1 << 20);
    ASSERT_TRUE(a.allocate(24, 16, origin));
    for (std::size_t align : {std::size_t{8192}, std::size_t{65536}}) {
      auto p = a.allocate(100, align, origin);
      ASSERT_TRUE(p) << "origin " << origin << " align " << align;
      EXPECT_EQ((origin + *p) % align, 0u) << "origin " << origin << " align " << align;
    }
  }
  BestFitAllocator a(1 << 20);
  EXPECT_FALSE(a.allocate(100, 4096, 8));  // an origin off the 16-byte granule
}

// Random alloc/free sequences: live blocks never overlap, stay in range, and the byte count
// balances; everything freed gives one block again.
TEST(BestFit, RandomSequencesKeepInvariants) {
  std::mt19937_64 rng(std::random_device{}());
  BestFitAllocator a(1 << 22);
  std::map<std::size_t, std::size_t> live;  // offset -> requested size
  std::size_t used = 0;
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      std::size_t size = 1 + rng() % 5000;
      std::size_t align = std::size_t{1} << (rng() % 10);
      auto off = a.allocate(size, align);
      if (!off) continue;
      ASSERT_EQ(*off % std::max<std::size_t>(align, 16), 0u);
      ASSERT_LE(*off + size, a.capacity());
      auto next = live.lower_bound(*off);
      if (next != live.end()) {
        ASSERT_LE(*off + size, next->first);
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second, *off);
      }
      live[*off] = size;
      used += *a.allocation_size(*off);
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      used -= *a.allocation_size(it->first);
      ASSERT_TRUE(a.release(it->first));
      live.erase(it);
    }
    ASSERT_EQ(a.free_bytes() + used, a.capacity());
  }
  for (auto& [off, size] : live) a.release(off);
  EXPECT_EQ(a.largest_free_block(), a.capacity());
}

}  // namespace
}  // namespace shmoe::heap
