// The symmetric heap: same offsets on every PE, shmem_ptr, calloc/align/realloc/free, exhaustion.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "pe_test.hpp"

namespace shmoe::test {
namespace {

// Every PE reports the offset of each allocation relative to its first; all must agree.
TEST(Heap, AllocationsAreSymmetric) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  const std::uint64_t seed = shared_seed();
  auto* base = static_cast<char*>(shmem_malloc(8));
  std::vector<char*> blocks;
  for (int i = 0; i < 20; ++i)
    blocks.push_back(static_cast<char*>(shmem_malloc(1 + mix(seed + i) % 10000)));
  for (int i = 0; i < 20; i += 3) shmem_free(blocks[i]);
  for (int i = 0; i < 20; i += 3) blocks[i] = static_cast<char*>(shmem_align(256, 100 + i));
  auto* offsets = static_cast<long*>(shmem_calloc(static_cast<std::size_t>(n) * 20, sizeof(long)));
  std::vector<long> mine(20);
  for (int i = 0; i < 20; ++i) mine[i] = blocks[i] - base;
  shmem_long_put(offsets + me * 20, mine.data(), 20, 0);
  shmem_barrier_all();
  if (me == 0) {
    for (int pe = 1; pe < n; ++pe) {
      for (int i = 0; i < 20; ++i)
        EXPECT_EQ(offsets[pe * 20 + i], offsets[i]) << "PE " << pe << " block " << i;
    }
  }
  for (int i = 0; i < 20; i += 3) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(blocks[i]) % 256, 0u);
  shmem_barrier_all();
  for (auto* b : blocks) shmem_free(b);
  shmem_free(offsets);
  shmem_free(base);
}

// shmem_ptr reaches exactly the PEs that share memory with this one (its host's PEs; only itself
// under SHMOE_TRANSPORT=ucx); stores through it land, and puts reach the others.
TEST(Heap, ShmemPtrReachesEveryPeerOnThisHost) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  const std::vector<bool> shared = expected_shared_memory_pes();
  auto* x = static_cast<int*>(shmem_calloc(n, sizeof(int)));
  for (int pe = 0; pe < n; ++pe) {
    int* remote = static_cast<int*>(shmem_ptr(x, pe));
    if (shared[pe]) {
      ASSERT_NE(remote, nullptr) << "PE " << pe << " is on this host";
      std::atomic_ref<int>(remote[me]).store(1000 * me + pe);
    } else {
      ASSERT_EQ(remote, nullptr) << "PE " << pe << " is reached through UCX";
      shmem_int_p(x + me, 1000 * me + pe, pe);
    }
    EXPECT_EQ(shmem_addr_accessible(x, pe), 1);
    EXPECT_EQ(shmem_pe_accessible(pe), 1);
  }
  EXPECT_EQ(shmem_pe_accessible(n), 0);
  int local = 0;
  EXPECT_EQ(shmem_addr_accessible(&local, 0), 0);
  EXPECT_EQ(shmem_ptr(&local, 0), nullptr);
  shmem_barrier_all();
  for (int pe = 0; pe < n; ++pe) EXPECT_EQ(x[pe], 1000 * pe + me);
  shmem_barrier_all();
  shmem_free(x);
}

TEST(Heap, CallocZeroesAndReallocKeepsContents) {
  const std::uint64_t seed = shared_seed();
  auto* a = static_cast<std::uint64_t*>(shmem_malloc(4096));
  std::memset(a, 0xAB, 4096);
  shmem_free(a);
  auto* z = static_cast<std::uint64_t*>(shmem_calloc(512, 8));  // likely the same block again
  for (int i = 0; i < 512; ++i) ASSERT_EQ(z[i], 0u) << i;
  for (int i = 0; i < 512; ++i) z[i] = mix(seed + i);
  auto* blocker = shmem_malloc(64);  // forces realloc to move
  auto* grown = static_cast<std::uint64_t*>(shmem_realloc(z, 1 << 20));
  ASSERT_NE(grown, nullptr);
  for (int i = 0; i < 512; ++i) ASSERT_EQ(grown[i], mix(seed + i)) << i;
  auto* same_block = static_cast<std::uint64_t*>(shmem_realloc(grown, 100));
  EXPECT_EQ(same_block, grown);
  EXPECT_EQ(shmem_realloc(same_block, 0), nullptr);
  EXPECT_EQ(shmem_malloc(0), nullptr);
  shmem_free(nullptr);
  shmem_free(blocker);
}

TEST(Heap, ExhaustionReturnsNullOnEveryPe) {
  void* huge = shmem_malloc(std::size_t{1} << 40);
  EXPECT_EQ(huge, nullptr);
  void* fine = shmem_malloc(1024);
  EXPECT_NE(fine, nullptr) << "a failed allocation must not break the heap";
  shmem_free(fine);
}

TEST(Setup, QueriesAnswer) {
  int major = 0, minor = 0, provided = -1;
  shmem_info_get_version(&major, &minor);
  EXPECT_EQ(major, 1);
  EXPECT_EQ(minor, 6);  // OpenSHMEM 1.6
  char name[SHMEM_MAX_NAME_LEN];
  shmem_info_get_name(name);
  EXPECT_EQ(std::strncmp(name, "shmoe", 5), 0);
  shmem_query_thread(&provided);
  EXPECT_EQ(provided, SHMEM_THREAD_MULTIPLE);
  shmem_ctx_t ctx = SHMEM_CTX_INVALID;
  ASSERT_EQ(shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx), 0);
  auto* x = static_cast<long*>(shmem_calloc(1, sizeof(long)));
  shmem_ctx_long_atomic_add(ctx, x, 5, 0);
  shmem_ctx_quiet(ctx);
  shmem_ctx_destroy(ctx);
  EXPECT_EQ(shmem_ctx_create(1L << 20, &ctx), -1) << "unknown options are refused";
  shmem_barrier_all();
  if (shmem_my_pe() == 0) {
    EXPECT_EQ(*x, 5L * shmem_n_pes());
  }
  shmem_barrier_all();
  shmem_free(x);
}

}  // namespace
}  // namespace shmoe::test
