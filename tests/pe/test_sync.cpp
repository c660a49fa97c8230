// Point-to-point synchronization, barriers and the data-before-signal guarantee.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <vector>

#include "pe_test.hpp"

namespace shmoe::test {
namespace {

// Each comparison operator, for every P2P type: the waiter must leave exactly when the value
// written by its left neighbour satisfies the comparison.
template <typename T>
struct SyncOps {
  void (*wait_until)(T*, int, T);
  int (*test)(T*, int, T);
  void (*p)(T*, T, int);
};

template <typename T>
void run_comparisons(const SyncOps<T>& ops) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  T* ivar = static_cast<T*>(shmem_calloc(1, sizeof(T)));
  struct Case {
    int cmp;
    T target, final_value;
  };
  const Case cases[] = {{SHMEM_CMP_EQ, T{7}, T{7}},   {SHMEM_CMP_NE, T{0}, T{9}},
                        {SHMEM_CMP_GT, T{10}, T{11}}, {SHMEM_CMP_GE, T{20}, T{20}},
                        {SHMEM_CMP_LT, T{5}, T{4}},   {SHMEM_CMP_LE, T{3}, T{3}}};
  const int next = (me + 1) % n;
  for (const Case& c : cases) {
    *ivar = c.cmp == SHMEM_CMP_LT || c.cmp == SHMEM_CMP_LE ? T{50} : T{0};
    // Checked before the barrier: after it, the neighbour may already have written.
    EXPECT_EQ(ops.test(ivar, c.cmp, c.target), 0) << "cmp " << c.cmp << " held too early";
    shmem_barrier_all();
    ops.p(ivar, c.final_value, next);
    ops.wait_until(ivar, c.cmp, c.target);
    EXPECT_EQ(*ivar, c.final_value);
    EXPECT_EQ(ops.test(ivar, c.cmp, c.target), 1);
    shmem_barrier_all();
  }
  shmem_free(ivar);
}

#define SYNC_TEST(T, N)                                                            \
  TEST(WaitUntil, N) {                                                             \
    run_comparisons<T>({shmem_##N##_wait_until, shmem_##N##_test, shmem_##N##_p}); \
  }
SHMOE_P2P_SYNC_TYPES(SYNC_TEST)

// The _all/_any/_some forms and their _vector variants: every PE sets one flag at each PE.
TEST(WaitUntil, AllAnySomeAndVectors) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  auto* flags = static_cast<long*>(shmem_calloc(n, sizeof(long)));
  std::vector<int> status(n, 0);
  std::vector<std::size_t> idx(n);
  std::vector<long> want(n);
  for (int i = 0; i < n; ++i) want[i] = 100 + i;
  EXPECT_EQ(shmem_long_test_any(flags, n, nullptr, SHMEM_CMP_GT, 0), SIZE_MAX);
  EXPECT_EQ(shmem_long_test_some(flags, n, idx.data(), nullptr, SHMEM_CMP_GT, 0), 0u);
  shmem_barrier_all();
  for (int pe = 0; pe < n; ++pe) shmem_long_p(&flags[me], 100 + me, pe);
  std::size_t any = shmem_long_wait_until_any(flags, n, nullptr, SHMEM_CMP_GE, 100);
  ASSERT_LT(any, static_cast<std::size_t>(n));
  EXPECT_EQ(flags[any], long(100 + any));
  std::size_t some = shmem_long_wait_until_some(flags, n, idx.data(), nullptr, SHMEM_CMP_GE, 100);
  ASSERT_GE(some, 1u);
  for (std::size_t k = 0; k < some; ++k) EXPECT_EQ(flags[idx[k]], long(100 + idx[k]));
  shmem_long_wait_until_all(flags, n, nullptr, SHMEM_CMP_GE, 100);
  shmem_long_wait_until_all_vector(flags, n, nullptr, SHMEM_CMP_EQ, want.data());
  EXPECT_EQ(shmem_long_test_all_vector(flags, n, nullptr, SHMEM_CMP_EQ, want.data()), 1);
  EXPECT_EQ(
      shmem_long_wait_until_some_vector(flags, n, idx.data(), nullptr, SHMEM_CMP_EQ, want.data()),
      static_cast<std::size_t>(n));
  EXPECT_LT(shmem_long_wait_until_any_vector(flags, n, nullptr, SHMEM_CMP_EQ, want.data()),
            static_cast<std::size_t>(n));
  // status excludes elements: with my own flag excluded and the comparison false for all the
  // others, test_any finds nothing; with every element excluded, wait_until_any returns at once.
  status[me] = 1;
  std::vector<long> impossible(n, -1);
  impossible[me] = 100 + me;
  EXPECT_EQ(shmem_long_test_any_vector(flags, n, status.data(), SHMEM_CMP_EQ, impossible.data()),
            SIZE_MAX);
  std::fill(status.begin(), status.end(), 1);
  EXPECT_EQ(shmem_long_wait_until_any(flags, n, status.data(), SHMEM_CMP_EQ, -5), SIZE_MAX);
  EXPECT_EQ(shmem_long_wait_until_some(flags, n, idx.data(), status.data(), SHMEM_CMP_EQ, -5), 0u);
  shmem_long_wait_until_all(flags, n, status.data(), SHMEM_CMP_EQ, -5);  // nothing to wait for
  shmem_barrier_all();
  shmem_free(flags);
}

// A barrier that let any PE through early would show a stale round number in some slot.
TEST(Barrier, NoPeLeavesBeforeAllArrive) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  auto* slots = static_cast<int*>(shmem_calloc(n, sizeof(int)));
  for (int round = 1; round <= 300; ++round) {
    for (int pe = 0; pe < n; ++pe) shmem_int_p(&slots[me], round, pe);
    (round % 2 ? shmem_barrier_all : shmem_sync_all)();
    for (int pe = 0; pe < n; ++pe) {
      ASSERT_EQ(std::atomic_ref<int>(slots[pe]).load(), round) << "PE " << pe << " round " << round;
    }
    shmem_barrier_all();
  }
  shmem_free(slots);
}

// put_signal: the waiter must never see the signal before the whole payload. Payloads of
// several MiB go through glibc's non-temporal stores, the case that needs the store fence.
TEST(PutSignal, SignalNeverOvertakesData) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  // Past 16 MiB the payload goes by non-temporal stores, which only a store fence orders.
  const std::size_t words = (n > 4 ? (3u << 20) : (17u << 20)) / 8;
  auto* buf = static_cast<std::uint64_t*>(shmem_malloc(words * 8));
  auto* sig = static_cast<std::uint64_t*>(shmem_calloc(2, sizeof(std::uint64_t)));
  std::vector<std::uint64_t> src(words);
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  const int iterations = n > 4 ? 10 : 8;
  for (int it = 1; it <= iterations; ++it) {
    for (std::size_t i = 0; i < words; ++i) src[i] = (std::uint64_t(it) << 32) | i;
    const int op = it % 2 ? SHMEM_SIGNAL_SET : SHMEM_SIGNAL_ADD;
    shmem_putmem_signal(buf, src.data(), words * 8, &sig[0], op == SHMEM_SIGNAL_SET ? it : 1, op,
                        next);
    std::uint64_t seen = shmem_signal_wait_until(&sig[0], SHMEM_CMP_GE, it);
    EXPECT_EQ(seen, static_cast<std::uint64_t>(it));
    for (std::size_t i = 0; i < words; i += 1) {
      ASSERT_EQ(buf[i], (std::uint64_t(it) << 32) | i)
          << "word " << i << " of iteration " << it << " from PE " << prev;
    }
    // Tell the writer its buffer may be overwritten.
    shmem_uint64_atomic_add(&sig[1], 1, prev);
    shmem_uint64_wait_until(&sig[1], SHMEM_CMP_GE, it);
  }
  EXPECT_EQ(shmem_signal_fetch(&sig[0]), static_cast<std::uint64_t>(iterations));
  shmem_barrier_all();
  shmem_free(sig);
  shmem_free(buf);
}

// The non-fetching operations (put_signal_nbi, atomic add and set, shmem_p) do not wait for the
// target; each context's quiet completes its own. Two contexts post to the next PE, and after
// both quiets and a barrier every payload, signal count, sum and value is there, each naming
// its writer and its index.
TEST(Contexts, PostedOperationsCompleteAtTheirContextsQuiet) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  constexpr int kOps = 300;
  struct Target {
    std::uint64_t rows[kOps];
    std::uint64_t signal;
    std::uint64_t sum;
    std::uint64_t last;
    long values[kOps];
  };
  auto* t = static_cast<Target*>(shmem_calloc(1, sizeof(Target)));
  ASSERT_NE(t, nullptr);
  shmem_ctx_t signals, atomics;
  ASSERT_EQ(shmem_ctx_create(0, &signals), 0);
  ASSERT_EQ(shmem_ctx_create(0, &atomics), 0);
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  auto row = [](int pe, int i) { return (std::uint64_t(pe + 1) << 32) | std::uint64_t(i); };
  auto value = [](int pe, int i) { return long(pe + 1) * 100000 + i; };
  std::vector<std::uint64_t> rows(kOps);  // untouched until the quiet
  for (int i = 0; i < kOps; ++i) {
    rows[i] = row(me, i);
    shmem_ctx_putmem_signal_nbi(signals, &t->rows[i], &rows[i], sizeof(std::uint64_t), &t->signal,
                                1, SHMEM_SIGNAL_ADD, next);
    shmem_ctx_uint64_atomic_add(atomics, &t->sum, std::uint64_t(i + 1), next);
    shmem_ctx_long_p(atomics, &t->values[i], value(me, i), next);
  }
  shmem_ctx_uint64_atomic_set(atomics, &t->last, row(me, kOps), next);
  shmem_ctx_quiet(signals);
  shmem_ctx_quiet(atomics);
  shmem_barrier_all();
  EXPECT_EQ(t->signal, std::uint64_t(kOps));
  EXPECT_EQ(t->sum, std::uint64_t(kOps) * (kOps + 1) / 2);
  EXPECT_EQ(t->last, row(prev, kOps));
  for (int i = 0; i < kOps; ++i) {
    ASSERT_EQ(t->rows[i], row(prev, i)) << "row " << i << " from PE " << prev;
    ASSERT_EQ(t->values[i], value(prev, i)) << "value " << i << " from PE " << prev;
  }
  shmem_ctx_destroy(signals);
  shmem_ctx_destroy(atomics);
  shmem_barrier_all();
  shmem_free(t);
}

// A peer's get is answered while this PE computes without calling SHMEM. Over UCX transports
// whose target must act (TCP), only the progress thread can answer it: with
// SHMOE_UCX_PROGRESS_THREAD=0 the get waits for the computation to end, and this test fails.
TEST(Progress, PeerOperationsCompleteWhileAPeComputes) {
  using Clock = std::chrono::steady_clock;
  const int me = shmem_my_pe(), n = shmem_n_pes();
  if (n < 2) GTEST_SKIP() << "needs a peer";
  auto* word = static_cast<long*>(shmem_calloc(1, sizeof(long)));
  if (me == 0) *word = 4242;
  shmem_barrier_all();
  constexpr auto kCompute = std::chrono::milliseconds(1500);
  if (me == 0) {
    const auto until = Clock::now() + kCompute;
    volatile std::uint64_t work = 0;
    while (Clock::now() < until) work = work + 1;
  } else {
    const auto start = Clock::now();
    const long seen = shmem_long_g(word, 0);
    const auto took = Clock::now() - start;
    EXPECT_EQ(seen, 4242);
    EXPECT_LT(took, kCompute / 2)
        << "a get from PE 0 took "
        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
        << " ms while PE 0 computed: nothing answered for it";
  }
  shmem_barrier_all();
  shmem_free(word);
}

}  // namespace
}  // namespace shmoe::test
