// SHMEM_THREAD_MULTIPLE: several threads of each PE issue puts and atomics at once, as the MoE
// operators' worker threads do.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "pe_test.hpp"

namespace shmoe::test {
namespace {

TEST(Threads, ConcurrentPutsAndAtomicsFromManyThreads) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  const int threads = 4, per_thread = 2000;
  const std::uint64_t seed = shared_seed();
  auto* counter = static_cast<long*>(shmem_calloc(1, sizeof(long)));
  auto* rows = static_cast<std::uint64_t*>(
      shmem_calloc(static_cast<std::size_t>(n) * threads * 64, sizeof(std::uint64_t)));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) shmem_long_atomic_inc(counter, (i + t) % n);
      std::uint64_t row[64];
      for (int dst = 0; dst < n; ++dst) {
        for (int k = 0; k < 64; ++k) row[k] = encode<std::uint64_t>(seed, me * threads + t, dst, k);
        shmem_uint64_put(rows + (me * threads + t) * 64, row, 64, dst);
      }
    });
  }
  for (auto& th : pool) th.join();
  shmem_barrier_all();
  long total = 0;
  for (int pe = 0; pe < n; ++pe) total += shmem_long_g(counter, pe);
  EXPECT_EQ(total, long{n} * threads * per_thread);
  for (int src = 0; src < n * threads; ++src) {
    for (int k = 0; k < 64; ++k) {
      ASSERT_EQ(rows[src * 64 + k], encode<std::uint64_t>(seed, src, me, k)) << "writer " << src;
    }
  }
  shmem_barrier_all();
  shmem_free(rows);
  shmem_free(counter);
}

}  // namespace
}  // namespace shmoe::test
