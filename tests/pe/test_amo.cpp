// Atomics of every standard, extended and bitwise AMO type, under contention from every PE.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "pe_test.hpp"

namespace shmoe::test {
namespace {

template <typename T>
struct StandardOps {
  T (*fetch_add)(T*, T, int);
  void (*add)(T*, T, int);
  T (*fetch_inc)(T*, int);
  void (*inc)(T*, int);
  T (*compare_swap)(T*, T, T, int);
  void (*fetch_add_nbi)(T*, T*, T, int);
  void (*fetch_inc_nbi)(T*, T*, int);
  void (*compare_swap_nbi)(T*, T*, T, T, int);
};

// Every PE adds to counters on every PE, alternating the fetching, non-fetching and _nbi forms.
// Totals must be exact, and the values fetched from PE 0's counter by all PEs together must be
// exactly 0..total-1 (no two operations ever saw the same value).
template <typename T>
void run_standard(const StandardOps<T>& ops) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  const std::uint64_t seed = shared_seed();
  const int rounds = 200 + static_cast<int>(mix(seed) % 100);
  const int evens = (rounds + 1) / 2, odds = rounds / 2;
  T* counters = static_cast<T*>(shmem_calloc(4, sizeof(T)));
  T* gathered = static_cast<T*>(shmem_calloc(static_cast<std::size_t>(n) * rounds, sizeof(T)));
  std::vector<T> fetched;
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < n; ++k) {
      const int pe = (me + k) % n;
      T f{}, unused{};
      if (r % 2 == 0) {
        f = ops.fetch_inc(&counters[0], pe);
        ops.add(&counters[1], T{3}, pe);
        ops.fetch_inc_nbi(&unused, &counters[2], pe);
      } else {
        ops.fetch_add_nbi(&f, &counters[0], T{1}, pe);
        ops.inc(&counters[1], pe);
        (void)ops.fetch_add(&counters[2], T{2}, pe);
      }
      shmem_quiet();
      if (pe == 0) fetched.push_back(f);
    }
  }
  shmem_barrier_all();
  EXPECT_EQ(counters[0], static_cast<T>(n * rounds)) << "fetch_inc + fetch_add_nbi total";
  EXPECT_EQ(counters[1], static_cast<T>(n * (evens * 3 + odds))) << "add + inc total";
  EXPECT_EQ(counters[2], static_cast<T>(n * (evens + odds * 2))) << "fetch_inc_nbi + fetch_add";
  shmem_putmem(gathered + me * rounds, fetched.data(), rounds * sizeof(T), 0);
  shmem_barrier_all();
  if (me == 0) {
    std::vector<T> v(gathered, gathered + n * rounds);
    std::sort(v.begin(), v.end());
    for (int i = 0; i < n * rounds; ++i) {
      ASSERT_EQ(v[i], static_cast<T>(i)) << "fetched values are not a permutation";
    }
  }
  shmem_barrier_all();
  shmem_free(gathered);

  // compare_swap: every PE tries to claim counters[3] on PE 0; exactly one wins.
  counters[3] = T{0};
  shmem_barrier_all();
  T old = ops.compare_swap(&counters[3], T{0}, static_cast<T>(me + 1), 0);
  T old_nbi{};
  ops.compare_swap_nbi(&old_nbi, &counters[3], T{0}, static_cast<T>(me + 100), 0);
  shmem_quiet();
  shmem_barrier_all();
  const T winner = shmem_my_pe() == 0 ? counters[3] : T{};
  T* winner_sym = &counters[2];
  if (me == 0) {
    for (int pe = 0; pe < n; ++pe) shmem_putmem(winner_sym, &winner, sizeof(T), pe);
  }
  shmem_barrier_all();
  const T w = *winner_sym;
  EXPECT_GE(w, T{1});
  EXPECT_LE(w, static_cast<T>(n));
  EXPECT_TRUE(old == T{0} ? w == static_cast<T>(me + 1) : old == w) << "compare_swap result";
  EXPECT_EQ(old_nbi, w) << "the second compare_swap must fail and see the winner";
  shmem_barrier_all();
  shmem_free(counters);
}

// Every PE contributes its fetched values to PE 0, which checks that they form a permutation of
// 0..total-1: proof that no two fetch_add calls ever saw the same value.
TEST(Amo, TenThousandFetchAddsGiveExactTotalAndDistinctValues) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  const int per_pe = 10000;
  auto* counter = static_cast<long*>(shmem_calloc(1, sizeof(long)));
  auto* all = static_cast<long*>(shmem_calloc(static_cast<std::size_t>(n) * per_pe, sizeof(long)));
  std::vector<long> mine(per_pe);
  for (int i = 0; i < per_pe; ++i) mine[i] = shmem_long_atomic_fetch_add(counter, 1, 0);
  shmem_long_put(all + me * per_pe, mine.data(), per_pe, 0);
  shmem_barrier_all();
  if (me == 0) {
    EXPECT_EQ(*counter, long{n} * per_pe);
    std::vector<long> v(all, all + n * per_pe);
    std::sort(v.begin(), v.end());
    for (long i = 0; i < long{n} * per_pe; ++i) {
      ASSERT_EQ(v[i], i) << "fetched values are not a permutation of 0.." << n * per_pe - 1;
    }
  }
  shmem_barrier_all();
  shmem_free(all);
  shmem_free(counter);
}

#define AMO_STANDARD_TEST(T, N)                                                               \
  TEST(AmoStandard, N) {                                                                      \
    run_standard<T>({shmem_##N##_atomic_fetch_add, shmem_##N##_atomic_add,                    \
                     shmem_##N##_atomic_fetch_inc, shmem_##N##_atomic_inc,                    \
                     shmem_##N##_atomic_compare_swap, shmem_##N##_atomic_fetch_add_nbi,       \
                     shmem_##N##_atomic_fetch_inc_nbi, shmem_##N##_atomic_compare_swap_nbi}); \
  }
SHMOE_AMO_STANDARD_TYPES(AMO_STANDARD_TEST)

template <typename T>
struct ExtendedOps {
  T (*fetch)(const T*, int);
  void (*set)(T*, T, int);
  T (*swap)(T*, T, int);
  void (*fetch_nbi)(T*, const T*, int);
  void (*swap_nbi)(T*, T*, T, int);
};

// set/fetch/swap through a ring: each PE sets its value at the next PE, and a chain of swaps
// must hand every value on exactly once.
template <typename T>
void run_extended(const ExtendedOps<T>& ops) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  const std::uint64_t seed = shared_seed();
  T* slot = static_cast<T*>(shmem_calloc(2, sizeof(T)));
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  ops.set(&slot[0], encode<T>(seed, me, next, 0), next);
  shmem_barrier_all();
  EXPECT_TRUE(same(slot[0], encode<T>(seed, prev, me, 0)));
  EXPECT_TRUE(same(ops.fetch(&slot[0], next), encode<T>(seed, me, next, 0)));
  T f{};
  ops.fetch_nbi(&f, &slot[0], prev);
  shmem_quiet();
  EXPECT_TRUE(same(f, encode<T>(seed, (prev + n - 1) % n, prev, 0)));
  shmem_barrier_all();
  // All PEs swap their own value into PE 0's slot[1]; the values seen plus the final one are
  // exactly the set of values put in, plus the initial zero.
  T got = ops.swap(&slot[1], encode<T>(seed, me, 0, 1), 0);
  T got2{};
  ops.swap_nbi(&got2, &slot[1], encode<T>(seed, me, 0, 2), 0);
  shmem_quiet();
  T* seen = static_cast<T*>(shmem_calloc(2 * n, sizeof(T)));
  T pair[2] = {got, got2};
  shmem_putmem(seen + 2 * me, pair, sizeof(pair), 0);
  shmem_barrier_all();
  if (me == 0) {
    std::vector<T> observed(seen, seen + 2 * n);
    observed.push_back(slot[1]);
    std::vector<T> expected{T{}};
    for (int pe = 0; pe < n; ++pe) {
      expected.push_back(encode<T>(seed, pe, 0, 1));
      expected.push_back(encode<T>(seed, pe, 0, 2));
    }
    std::sort(observed.begin(), observed.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(observed, expected) << "swap lost or duplicated a value";
  }
  shmem_barrier_all();
  shmem_free(seen);
  shmem_free(slot);
}

#define AMO_EXTENDED_TEST(T, N)                                                                 \
  TEST(AmoExtended, N) {                                                                        \
    run_extended<T>({shmem_##N##_atomic_fetch, shmem_##N##_atomic_set, shmem_##N##_atomic_swap, \
                     shmem_##N##_atomic_fetch_nbi, shmem_##N##_atomic_swap_nbi});               \
  }
SHMOE_AMO_EXTENDED_TYPES(AMO_EXTENDED_TEST)

template <typename T>
struct BitwiseOps {
  T (*fetch_and)(T*, T, int);
  void (*and_)(T*, T, int);
  T (*fetch_or)(T*, T, int);
  void (*or_)(T*, T, int);
  T (*fetch_xor)(T*, T, int);
  void (*xor_)(T*, T, int);
  void (*fetch_or_nbi)(T*, T*, T, int);
};

// Each PE owns bits of a word on PE 0: OR sets them, XOR flips them twice, AND clears them.
template <typename T>
void run_bitwise(const BitwiseOps<T>& ops) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  T* word = static_cast<T*>(shmem_calloc(2, sizeof(T)));
  const T bit = static_cast<T>(T{1} << me);
  const T all = static_cast<T>((T{1} << n) - 1);
  ops.or_(&word[0], bit, 0);
  T f{};
  ops.fetch_or_nbi(&f, &word[1], bit, 0);
  shmem_quiet();
  shmem_barrier_all();
  EXPECT_EQ(ops.fetch_or(&word[0], T{0}, 0), all);
  EXPECT_EQ(ops.fetch_xor(&word[1], T{0}, 0), all);
  shmem_barrier_all();
  ops.xor_(&word[0], bit, 0);
  (void)ops.fetch_xor(&word[0], bit, 0);
  shmem_barrier_all();
  EXPECT_EQ(shmem_my_pe() == 0 ? word[0] : all, all) << "double xor must restore every bit";
  shmem_barrier_all();
  T before = ops.fetch_and(&word[0], static_cast<T>(~bit), 0);
  EXPECT_TRUE((before & bit) != 0) << "my bit was already cleared";
  ops.and_(&word[1], static_cast<T>(~bit), 0);
  shmem_barrier_all();
  if (me == 0) {
    EXPECT_EQ(word[0], T{0});
    EXPECT_EQ(word[1], T{0});
  }
  shmem_barrier_all();
  shmem_free(word);
}

#define AMO_BITWISE_TEST(T, N)                                            \
  TEST(AmoBitwise, N) {                                                   \
    run_bitwise<T>({shmem_##N##_atomic_fetch_and, shmem_##N##_atomic_and, \
                    shmem_##N##_atomic_fetch_or, shmem_##N##_atomic_or,   \
                    shmem_##N##_atomic_fetch_xor, shmem_##N##_atomic_xor, \
                    shmem_##N##_atomic_fetch_or_nbi});                    \
  }
SHMOE_AMO_BITWISE_TYPES(AMO_BITWISE_TEST)

}  // namespace
}  // namespace shmoe::test
