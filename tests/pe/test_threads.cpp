// SHMEM_THREAD_MULTIPLE: several threads of each PE issue puts, gets and atomics at once, as the
// MoE operators' worker threads do.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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

// A thread's quiet completes that thread's gets, even while another thread's flush of the same
// peer is under way: thread A reads a big block from a PE on another host (over UCX), thread B
// starts a get from that PE too (its own wait for A's block to land in between), and A's quiet
// then must not return before A's block is all here. Checked the moment A's quiet returns.
TEST(Threads, EachThreadsQuietCompletesItsOwnGetsWhileAnotherFlushes) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  const int peer = (me + (n + 1) / 2) % n;              // the other fake host's PE at two_hosts.np4
  constexpr std::size_t kWords = std::size_t{2} << 20;  // 16 MiB
  const std::uint64_t seed = shared_seed();
  auto* src = static_cast<std::uint64_t*>(shmem_malloc(kWords * sizeof(std::uint64_t)));
  for (std::size_t k = 0; k < kWords; ++k) src[k] = encode<std::uint64_t>(seed, me, 0, k);
  shmem_barrier_all();
  std::vector<std::uint64_t> big(kWords), small(8);
  for (int round = 0; round < 8; ++round) {
    std::fill(big.begin(), big.end(), 0);
    std::atomic<int> step{0};
    std::size_t missing = 0;
    std::thread a([&] {
      shmem_getmem_nbi(big.data(), src, kWords * sizeof(std::uint64_t), peer);
      step.store(1);
      while (step.load() < 2) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // B is in its wait by now
      shmem_quiet();
      for (std::size_t k = 0; k < kWords; k += 509) {
        missing += big[k] != encode<std::uint64_t>(seed, peer, 0, k);
      }
      missing += big[kWords - 1] != encode<std::uint64_t>(seed, peer, 0, kWords - 1);
    });
    std::thread b([&] {
      while (step.load() < 1) std::this_thread::yield();
      step.store(2);
      shmem_getmem_nbi(small.data(), src, sizeof(std::uint64_t) * small.size(), peer);
      shmem_quiet();
    });
    a.join();
    b.join();
    ASSERT_EQ(missing, 0u) << "round " << round
                           << ": thread A's quiet returned before its get from PE " << peer
                           << " landed";
    for (std::size_t k = 0; k < small.size(); ++k)
      ASSERT_EQ(small[k], encode<std::uint64_t>(seed, peer, 0, k)) << "round " << round;
  }
  shmem_barrier_all();
  shmem_free(src);
}

}  // namespace
}  // namespace shmoe::test
