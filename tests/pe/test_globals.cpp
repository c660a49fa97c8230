// Global, file-static and function-static variables of the executable as symmetric data objects
// (OpenSHMEM 1.5, 3.3): every routine family that takes a symmetric address, with values that
// encode (seed, source PE, destination PE, index). Built twice: as a PIE linking libshmoe.so and
// as a non-PIE executable linking libshmoe.a (test_globals_static).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "pe_test.hpp"

namespace {

constexpr int kMaxPes = 8;
constexpr std::size_t kLen = 64;

// Initialised data (.data): its initial values must survive shmem_init untouched.
constexpr long initial_value(std::size_t i) {
  return static_cast<long>(0x5EED0000 + i * 7919);
}
template <std::size_t... I>
constexpr std::array<long, sizeof...(I)> initial_table(std::index_sequence<I...>) {
  return {initial_value(I)...};
}
std::array<long, kLen> g_initialised = initial_table(std::make_index_sequence<kLen>{});
int g_answer = 42;

// Zero-initialised globals and file statics (.bss).
long g_rows[kMaxPes * kLen];
static int s_ints[kMaxPes * kLen];
static double s_doubles[kLen];
std::uint64_t g_signal;
long g_lock;
static long s_guarded_counter;
long g_counter;
static unsigned int s_bits;
static int s_ivars[kMaxPes];
long g_psync[SHMEM_REDUCE_SYNC_SIZE];
long g_pwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE > kLen / 2 + 1 ? SHMEM_REDUCE_MIN_WRKDATA_SIZE
                                                         : kLen / 2 + 1];
long g_reduce_source[kLen];
long g_reduce_dest[kLen];
long g_collect_dest[kMaxPes * kLen];

// A function-static object.
long* function_static_rows() {
  static long rows[kMaxPes * kLen];
  return rows;
}

using shmoe::test::encode;
using shmoe::test::shared_seed;

class Globals : public testing::Test {
 protected:
  void SetUp() override {
    me = shmem_my_pe();
    n = shmem_n_pes();
    ASSERT_LE(n, kMaxPes);
    seed = shared_seed();
    right = (me + 1) % n;
    left = (me + n - 1) % n;
  }
  int me = 0, n = 0, right = 0, left = 0;
  std::uint64_t seed = 0;
};

TEST_F(Globals, InitialisedDataKeepsItsValuesUntilWritten) {
  // Nothing has written these yet (this test runs first, tests run in declaration order).
  for (std::size_t i = 0; i < kLen; ++i) ASSERT_EQ(g_initialised[i], initial_value(i)) << i;
  ASSERT_EQ(g_answer, 42);
  // A peer's copy holds the initial values too.
  std::array<long, kLen> peer{};
  shmem_long_get(peer.data(), g_initialised.data(), kLen, right);
  for (std::size_t i = 0; i < kLen; ++i) ASSERT_EQ(peer[i], initial_value(i)) << i;
  EXPECT_EQ(shmem_int_g(&g_answer, right), 42);
  shmem_barrier_all();
  // Now write: each PE overwrites element `me` of its right neighbour's table.
  shmem_long_p(&g_initialised[me], encode<long>(seed, me, right, me), right);
  shmem_barrier_all();
  for (std::size_t i = 0; i < kLen; ++i) {
    long want =
        i == static_cast<std::size_t>(left) ? encode<long>(seed, left, me, left) : initial_value(i);
    ASSERT_EQ(g_initialised[i], want) << i;
  }
}

TEST_F(Globals, PutGetEveryForm) {
  std::vector<long> src(kLen);
  // Blocking put into a global, _nbi put into a file static, sized put into a function static.
  for (std::size_t i = 0; i < kLen; ++i) src[i] = encode<long>(seed, me, right, i);
  shmem_long_put(g_rows + me * kLen, src.data(), kLen, right);
  std::vector<int> isrc(kLen);
  for (std::size_t i = 0; i < kLen; ++i) isrc[i] = encode<int>(seed + 1, me, right, i);
  shmem_int_put_nbi(s_ints + me * kLen, isrc.data(), kLen, right);
  for (std::size_t i = 0; i < kLen; ++i) src[i] = encode<long>(seed + 2, me, right, i);
  shmem_put64(function_static_rows() + me * kLen, src.data(), kLen, right);
  shmem_quiet();
  shmem_barrier_all();
  for (std::size_t i = 0; i < kLen; ++i) {
    ASSERT_EQ(g_rows[left * kLen + i], encode<long>(seed, left, me, i)) << i;
    ASSERT_EQ(s_ints[left * kLen + i], encode<int>(seed + 1, left, me, i)) << i;
    ASSERT_EQ(function_static_rows()[left * kLen + i], encode<long>(seed + 2, left, me, i)) << i;
  }
  // Gets of every form read the right neighbour's copy, which its left neighbour (me) wrote.
  std::vector<long> got(kLen);
  shmem_long_get(got.data(), g_rows + me * kLen, kLen, right);
  for (std::size_t i = 0; i < kLen; ++i) ASSERT_EQ(got[i], encode<long>(seed, me, right, i));
  std::vector<int> igot(kLen);
  shmem_int_get_nbi(igot.data(), s_ints + me * kLen, kLen, right);
  shmem_quiet();
  for (std::size_t i = 0; i < kLen; ++i) ASSERT_EQ(igot[i], encode<int>(seed + 1, me, right, i));
  shmem_getmem(got.data(), function_static_rows() + me * kLen, kLen * sizeof(long), right);
  for (std::size_t i = 0; i < kLen; ++i) ASSERT_EQ(got[i], encode<long>(seed + 2, me, right, i));
  EXPECT_EQ(shmem_long_g(g_rows + me * kLen + 3, right), encode<long>(seed, me, right, 3));
  shmem_barrier_all();

  // Strided: every second element of a double file static, then read back with iget.
  std::vector<double> dsrc(kLen / 2);
  for (std::size_t i = 0; i < kLen / 2; ++i) dsrc[i] = encode<double>(seed + 3, me, right, i);
  shmem_double_iput(s_doubles, dsrc.data(), 2, 1, kLen / 2, right);
  shmem_barrier_all();
  for (std::size_t i = 0; i < kLen / 2; ++i) {
    ASSERT_EQ(s_doubles[2 * i], encode<double>(seed + 3, left, me, i)) << i;
  }
  std::vector<double> dgot(kLen / 2);
  shmem_double_iget(dgot.data(), s_doubles, 1, 2, kLen / 2, right);
  for (std::size_t i = 0; i < kLen / 2; ++i) ASSERT_EQ(dgot[i], dsrc[i]) << i;
  shmem_barrier_all();
}

TEST_F(Globals, AtomicsOnGlobalsAndStatics) {
  if (me == 0) g_counter = 0;
  if (me == 0) s_bits = 0;
  shmem_barrier_all();
  // Every PE adds an amount that names it; the sum is known in closed form.
  long before = shmem_long_atomic_fetch_add(&g_counter, 1L << (4 * me), 0);
  EXPECT_GE(before, 0);
  shmem_uint_atomic_or(&s_bits, 1u << me, 0);
  long fetched = 0;
  shmem_long_atomic_fetch_nbi(&fetched, &g_counter, 0);
  shmem_quiet();
  EXPECT_GE(fetched, 1L << (4 * me));
  shmem_barrier_all();
  if (me == 0) {
    long want = 0;
    for (int pe = 0; pe < n; ++pe) want += 1L << (4 * pe);
    EXPECT_EQ(g_counter, want);
    EXPECT_EQ(s_bits, (1u << n) - 1);
  }
  shmem_barrier_all();
  // compare-and-swap ring: PE me swaps its code into its right neighbour's file static.
  shmem_int_atomic_set(&s_ints[0], -1, right);
  shmem_barrier_all();
  int old = shmem_int_atomic_compare_swap(&s_ints[0], -1, encode<int>(seed, me, right, 0), right);
  EXPECT_EQ(old, -1);
  shmem_barrier_all();
  EXPECT_EQ(shmem_int_atomic_fetch(&s_ints[0], me), encode<int>(seed, left, me, 0));
  shmem_barrier_all();
}

TEST_F(Globals, PutSignalIntoAGlobalSignalWord) {
  g_signal = 0;
  shmem_barrier_all();
  std::vector<long> src(kLen);
  for (std::size_t i = 0; i < kLen; ++i) src[i] = encode<long>(seed + 4, me, right, i);
  shmem_long_put_signal(g_rows, src.data(), kLen, &g_signal, static_cast<std::uint64_t>(me + 1),
                        SHMEM_SIGNAL_SET, right);
  EXPECT_EQ(shmem_signal_wait_until(&g_signal, SHMEM_CMP_EQ, static_cast<std::uint64_t>(left + 1)),
            static_cast<std::uint64_t>(left + 1));
  for (std::size_t i = 0; i < kLen; ++i) ASSERT_EQ(g_rows[i], encode<long>(seed + 4, left, me, i));
  EXPECT_EQ(shmem_signal_fetch(&g_signal), static_cast<std::uint64_t>(left + 1));
  shmem_barrier_all();
}

TEST_F(Globals, LockAndCounterAreGlobals) {
  if (me == 0) s_guarded_counter = 0;
  shmem_barrier_all();
  // A read-modify-write that is only correct under mutual exclusion.
  constexpr int kRounds = 20;
  for (int r = 0; r < kRounds; ++r) {
    shmem_set_lock(&g_lock);
    long v = shmem_long_g(&s_guarded_counter, 0);
    shmem_long_p(&s_guarded_counter, v + me + 1, 0);
    shmem_quiet();
    shmem_clear_lock(&g_lock);
  }
  shmem_barrier_all();
  if (me == 0) {
    EXPECT_EQ(s_guarded_counter, kRounds * n * (n + 1) / 2);
  }
  shmem_barrier_all();
}

TEST_F(Globals, WaitAndTestEveryFormOnStaticIvars) {
  for (int pe = 0; pe < kMaxPes; ++pe) s_ivars[pe] = 0;
  shmem_barrier_all();
  // Every PE writes its code into slot `me` of every PE's ivars.
  for (int pe = 0; pe < n; ++pe) shmem_int_atomic_set(&s_ivars[me], me + 1, pe);
  shmem_int_wait_until(&s_ivars[left], SHMEM_CMP_EQ, left + 1);
  shmem_int_wait_until_all(s_ivars, n, nullptr, SHMEM_CMP_GT, 0);
  std::size_t any = shmem_int_wait_until_any(s_ivars, n, nullptr, SHMEM_CMP_GT, 0);
  EXPECT_LT(any, static_cast<std::size_t>(n));
  std::vector<std::size_t> idx(n);
  std::size_t some = shmem_int_wait_until_some(s_ivars, n, idx.data(), nullptr, SHMEM_CMP_GT, 0);
  EXPECT_EQ(some, static_cast<std::size_t>(n));
  std::vector<int> values(n);
  for (int pe = 0; pe < n; ++pe) values[pe] = pe + 1;
  shmem_int_wait_until_all_vector(s_ivars, n, nullptr, SHMEM_CMP_EQ, values.data());
  EXPECT_EQ(shmem_int_test(&s_ivars[me], SHMEM_CMP_EQ, me + 1), 1);
  EXPECT_EQ(shmem_int_test_all(s_ivars, n, nullptr, SHMEM_CMP_GE, 1), 1);
  EXPECT_LT(shmem_int_test_any(s_ivars, n, nullptr, SHMEM_CMP_EQ, left + 1),
            static_cast<std::size_t>(n));
  EXPECT_EQ(shmem_int_test_some(s_ivars, n, idx.data(), nullptr, SHMEM_CMP_NE, 0),
            static_cast<std::size_t>(n));
  for (int pe = 0; pe < n; ++pe) EXPECT_EQ(s_ivars[pe], pe + 1) << pe;
  shmem_barrier_all();
}

TEST_F(Globals, CollectivesOnGlobals) {
  for (std::size_t i = 0; i < kLen; ++i) g_reduce_source[i] = encode<long>(seed, me, 0, i) & 0xFFFF;
  shmem_barrier_all();
  // Team reduction, broadcast, fcollect and alltoall with global source and destination.
  ASSERT_EQ(shmem_long_sum_reduce(SHMEM_TEAM_WORLD, g_reduce_dest, g_reduce_source, kLen), 0);
  for (std::size_t i = 0; i < kLen; ++i) {
    long want = 0;
    for (int pe = 0; pe < n; ++pe) want += encode<long>(seed, pe, 0, i) & 0xFFFF;
    ASSERT_EQ(g_reduce_dest[i], want) << i;
  }
  shmem_barrier_all();  // the broadcast below writes every PE's dest: all must have checked it
  const int root = n - 1;
  ASSERT_EQ(shmem_long_broadcast(SHMEM_TEAM_WORLD, g_reduce_dest, g_reduce_source, kLen, root), 0);
  for (std::size_t i = 0; i < kLen; ++i) {
    ASSERT_EQ(g_reduce_dest[i], encode<long>(seed, root, 0, i) & 0xFFFF) << i;
  }
  shmem_barrier_all();
  ASSERT_EQ(shmem_long_fcollect(SHMEM_TEAM_WORLD, g_collect_dest, g_reduce_source, kLen), 0);
  for (int pe = 0; pe < n; ++pe) {
    for (std::size_t i = 0; i < kLen; ++i) {
      ASSERT_EQ(g_collect_dest[pe * kLen + i], encode<long>(seed, pe, 0, i) & 0xFFFF);
    }
  }
  shmem_barrier_all();
  const std::size_t per = kLen / kMaxPes;
  for (int pe = 0; pe < n; ++pe) {
    for (std::size_t i = 0; i < per; ++i) g_rows[pe * per + i] = encode<long>(seed + 5, me, pe, i);
  }
  shmem_barrier_all();
  ASSERT_EQ(shmem_long_alltoall(SHMEM_TEAM_WORLD, g_collect_dest, g_rows, per), 0);
  for (int pe = 0; pe < n; ++pe) {
    for (std::size_t i = 0; i < per; ++i) {
      ASSERT_EQ(g_collect_dest[pe * per + i], encode<long>(seed + 5, pe, me, i));
    }
  }
  shmem_barrier_all();

  // The deprecated active-set forms with global pSync and pWrk.
  for (auto& w : g_psync) w = SHMEM_SYNC_VALUE;
  shmem_barrier_all();
  shmem_long_max_to_all(g_reduce_dest, g_reduce_source, kLen, 0, 0, n, g_pwrk, g_psync);
  for (std::size_t i = 0; i < kLen; ++i) {
    long want = 0;
    for (int pe = 0; pe < n; ++pe) want = std::max(want, encode<long>(seed, pe, 0, i) & 0xFFFF);
    ASSERT_EQ(g_reduce_dest[i], want) << i;
  }
  shmem_barrier(0, 0, n, g_psync);  // also: every PE has checked dest before the broadcast
  shmem_broadcast64(g_reduce_dest, g_reduce_source, kLen, 0, 0, 0, n, g_psync);
  if (me != 0) {
    for (std::size_t i = 0; i < kLen; ++i) {
      ASSERT_EQ(g_reduce_dest[i], encode<long>(seed, 0, 0, i) & 0xFFFF) << i;
    }
  }
  shmem_barrier_all();
}

TEST_F(Globals, PointerAndAccessibility) {
  const std::vector<bool> shared = shmoe::test::expected_shared_memory_pes();
  for (int pe = 0; pe < n; ++pe) {
    EXPECT_EQ(shmem_addr_accessible(&g_counter, pe), 1) << pe;
    EXPECT_EQ(shmem_addr_accessible(function_static_rows(), pe), 1) << pe;
    EXPECT_EQ(shmem_ptr(&g_counter, pe) != nullptr, static_cast<bool>(shared[pe])) << pe;
  }
  EXPECT_EQ(shmem_ptr(&g_counter, me), static_cast<void*>(&g_counter));
  long local = 0;
  EXPECT_EQ(shmem_addr_accessible(&local, me), 0);
  // A store through shmem_ptr lands in the peer's global.
  if (auto* p = static_cast<long*>(shmem_ptr(&g_rows[me], right)); p != nullptr) {
    *p = encode<long>(seed + 6, me, right, 0);
  } else {
    shmem_long_p(&g_rows[me], encode<long>(seed + 6, me, right, 0), right);
  }
  shmem_barrier_all();
  EXPECT_EQ(g_rows[left], encode<long>(seed + 6, left, me, 0));
  shmem_barrier_all();
}

}  // namespace
