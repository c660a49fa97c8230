// The C++ overloads of the type-generic names that OpenSHMEM 1.5 added or whose type lists were
// short (shmoe/generic.h), instantiated for every type of the specification's tables as written
// here (the fixed-width and size types resolve to the overload of the type they alias): the
// _nbi AMOs, plain and on a context, the _vector wait/test forms with short and unsigned short,
// AND/OR/XOR reductions on int8_t .. int64_t, and 1.6's ibput/ibget and sum_inscan/exscan. Values
// encode the PE that produced them.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pe_test.hpp"

namespace shmoe::test {
namespace {

struct Ring {
  int me = shmem_my_pe(), n = shmem_n_pes();
  int next = (me + 1) % n, prev = (me + n - 1) % n;
};

template <typename T>
T initial(int pe, int word) {
  return static_cast<T>(1000 * pe + 10 * word + 1);
}

// Table 6 (standard AMO types).
using StandardAmo =
    ::testing::Types<int, long, long long, unsigned int, unsigned long, unsigned long long, int32_t,
                     int64_t, uint32_t, uint64_t, std::size_t, std::ptrdiff_t>;
template <typename T>
class NbiStandard : public ::testing::Test {};
TYPED_TEST_SUITE(NbiStandard, StandardAmo);

TYPED_TEST(NbiStandard, FetchingFormsOnTheNeighbour) {
  using T = TypeParam;
  const Ring r;
  shmem_ctx_t ctx;
  ASSERT_EQ(shmem_ctx_create(0, &ctx), 0);
  T* w = static_cast<T*>(shmem_malloc(6 * sizeof(T)));
  for (int i = 0; i < 6; ++i) w[i] = initial<T>(r.me, i);
  shmem_barrier_all();
  T f[6] = {};
  shmem_atomic_compare_swap_nbi(f + 0, w + 0, initial<T>(r.next, 0), T(r.me + 7), r.next);
  shmem_atomic_compare_swap_nbi(ctx, f + 1, w + 1, T(0), T(99), r.next);  // no swap
  shmem_atomic_fetch_inc_nbi(f + 2, w + 2, r.next);
  shmem_atomic_fetch_inc_nbi(ctx, f + 3, w + 3, r.next);
  shmem_atomic_fetch_add_nbi(f + 4, w + 4, T(10 + r.me), r.next);
  shmem_atomic_fetch_add_nbi(ctx, f + 5, w + 5, T(20 + r.me), r.next);
  shmem_ctx_quiet(ctx);
  shmem_quiet();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(f[i], initial<T>(r.next, i)) << "word " << i;
  shmem_barrier_all();
  EXPECT_EQ(w[0], T(r.prev + 7));
  EXPECT_EQ(w[1], initial<T>(r.me, 1));
  EXPECT_EQ(w[2], T(initial<T>(r.me, 2) + 1));
  EXPECT_EQ(w[3], T(initial<T>(r.me, 3) + 1));
  EXPECT_EQ(w[4], T(initial<T>(r.me, 4) + 10 + r.prev));
  EXPECT_EQ(w[5], T(initial<T>(r.me, 5) + 20 + r.prev));
  shmem_barrier_all();
  shmem_free(w);
  shmem_ctx_destroy(ctx);
}

// Table 7 (extended AMO types): the standard ones and float, double.
using ExtendedAmo = ::testing::Types<float, double, int, long, long long, unsigned int,
                                     unsigned long, unsigned long long, int32_t, int64_t, uint32_t,
                                     uint64_t, std::size_t, std::ptrdiff_t>;
template <typename T>
class NbiExtended : public ::testing::Test {};
TYPED_TEST_SUITE(NbiExtended, ExtendedAmo);

TYPED_TEST(NbiExtended, FetchAndSwap) {
  using T = TypeParam;
  const Ring r;
  T* w = static_cast<T*>(shmem_malloc(4 * sizeof(T)));
  for (int i = 0; i < 4; ++i) w[i] = initial<T>(r.me, i);
  shmem_barrier_all();
  T f[4] = {};
  shmem_atomic_fetch_nbi(f + 0, w + 0, r.next);
  shmem_atomic_fetch_nbi(SHMEM_CTX_DEFAULT, f + 1, w + 1, r.next);
  shmem_atomic_swap_nbi(f + 2, w + 2, T(r.me + 3), r.next);
  shmem_atomic_swap_nbi(SHMEM_CTX_DEFAULT, f + 3, w + 3, T(r.me + 4), r.next);
  shmem_quiet();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(f[i], initial<T>(r.next, i)) << "word " << i;
  shmem_barrier_all();
  EXPECT_EQ(w[2], T(r.prev + 3));
  EXPECT_EQ(w[3], T(r.prev + 4));
  shmem_barrier_all();
  shmem_free(w);
}

// Table 8 (bitwise AMO types).
using BitwiseAmo = ::testing::Types<unsigned int, unsigned long, unsigned long long, int32_t,
                                    int64_t, uint32_t, uint64_t>;
template <typename T>
class NbiBitwise : public ::testing::Test {};
TYPED_TEST_SUITE(NbiBitwise, BitwiseAmo);

// Every PE sets, clears and flips its own bit of three words on PE 0; the fetched values show
// the bit before the operation.
TYPED_TEST(NbiBitwise, EachPeOwnsABitOnPeZero) {
  using T = TypeParam;
  const Ring r;
  const T mine = T(1) << (r.me * 5 % 31);
  T all = 0;
  for (int pe = 0; pe < r.n; ++pe) all |= T(1) << (pe * 5 % 31);
  T* w = static_cast<T*>(shmem_malloc(3 * sizeof(T)));
  w[0] = 0;
  w[1] = w[2] = all;
  shmem_barrier_all();
  T f = 0;
  shmem_atomic_fetch_or_nbi(&f, w + 0, mine, 0);
  shmem_quiet();
  EXPECT_EQ(f & mine, T(0));
  shmem_atomic_fetch_and_nbi(SHMEM_CTX_DEFAULT, &f, w + 1, T(~mine), 0);
  shmem_quiet();
  EXPECT_EQ(f & mine, mine);
  shmem_atomic_fetch_xor_nbi(&f, w + 2, mine, 0);
  shmem_quiet();
  EXPECT_EQ(f & mine, mine);
  shmem_barrier_all();
  if (r.me == 0) {
    EXPECT_EQ(w[0], all);
    EXPECT_EQ(w[1], T(0));
    EXPECT_EQ(w[2], T(0));
  }
  shmem_barrier_all();
  shmem_free(w);
}

// The point-to-point synchronization types of OpenSHMEM 1.5.
using P2p = ::testing::Types<short, int, long, long long, unsigned short, unsigned int,
                             unsigned long, unsigned long long, int32_t, int64_t, uint32_t,
                             uint64_t, std::size_t, std::ptrdiff_t>;
template <typename T>
class P2pVectors : public ::testing::Test {};
TYPED_TEST_SUITE(P2pVectors, P2p);

// Every PE puts 100 + its number into its own slot on every PE.
TYPED_TEST(P2pVectors, EverySlotFilledByItsOwner) {
  using T = TypeParam;
  const Ring r;
  T* slots = static_cast<T*>(shmem_calloc(r.n, sizeof(T)));
  std::vector<T> want(r.n), never(r.n, T(7));
  std::vector<std::size_t> idx(r.n);
  std::vector<int> status(r.n, 0);
  for (int i = 0; i < r.n; ++i) want[i] = T(100 + i);
  EXPECT_EQ(shmem_test(&slots[r.me], SHMEM_CMP_EQ, want[r.me]), 0);
  shmem_barrier_all();
  for (int pe = 0; pe < r.n; ++pe) shmem_p(&slots[r.me], want[r.me], pe);
  shmem_wait_until(&slots[r.prev], SHMEM_CMP_EQ, want[r.prev]);
  shmem_wait_until_all_vector(slots, r.n, nullptr, SHMEM_CMP_EQ, want.data());
  EXPECT_EQ(shmem_test_all_vector(slots, r.n, nullptr, SHMEM_CMP_EQ, want.data()), 1);
  EXPECT_EQ(shmem_test_all_vector(slots, r.n, nullptr, SHMEM_CMP_EQ, never.data()), 0);
  std::size_t any = shmem_wait_until_any_vector(slots, r.n, nullptr, SHMEM_CMP_EQ, want.data());
  ASSERT_LT(any, std::size_t(r.n));
  EXPECT_EQ(slots[any], want[any]);
  EXPECT_EQ(shmem_test_any_vector(slots, r.n, nullptr, SHMEM_CMP_EQ, never.data()), SIZE_MAX);
  EXPECT_EQ(
      shmem_wait_until_some_vector(slots, r.n, idx.data(), nullptr, SHMEM_CMP_EQ, want.data()),
      std::size_t(r.n));
  status[r.me] = 1;
  EXPECT_EQ(
      shmem_test_some_vector(slots, r.n, idx.data(), status.data(), SHMEM_CMP_EQ, want.data()),
      std::size_t(r.n - 1));
  shmem_wait_until_all(slots, r.n, status.data(), SHMEM_CMP_GE, T(100));
  EXPECT_EQ(shmem_test_all(slots, r.n, nullptr, SHMEM_CMP_LT, T(100 + r.n)), 1);
  any = shmem_test_any(slots, r.n, status.data(), SHMEM_CMP_GE, T(100));
  EXPECT_TRUE(r.n == 1 ? any == SIZE_MAX : any < std::size_t(r.n) && any != std::size_t(r.me));
  EXPECT_EQ(shmem_wait_until_some(slots, r.n, idx.data(), nullptr, SHMEM_CMP_GE, T(100)),
            std::size_t(r.n));
  EXPECT_EQ(shmem_test(&slots[r.me], SHMEM_CMP_EQ, want[r.me]), 1);
  shmem_barrier_all();
  shmem_free(slots);
}

// Table 10, AND/OR/XOR.
using BitwiseReduce = ::testing::Types<unsigned char, unsigned short, unsigned int, unsigned long,
                                       unsigned long long, int8_t, int16_t, int32_t, int64_t,
                                       uint8_t, uint16_t, uint32_t, uint64_t, std::size_t>;
template <typename T>
class BitwiseReductions : public ::testing::Test {};
TYPED_TEST_SUITE(BitwiseReductions, BitwiseReduce);

TYPED_TEST(BitwiseReductions, AndOrXorOverTheWorld) {
  using T = TypeParam;
  const Ring r;
  const int bits = 8 * sizeof(T) - 1;
  T want_or = 0, want_and = T(~T(0)), want_xor = 0;
  for (int pe = 0; pe < r.n; ++pe) {
    want_or = T(want_or | T(T(1) << (pe % bits)));
    want_and = T(want_and & T(~(T(1) << (pe % bits))));
    want_xor = T(want_xor ^ T(pe + 1));
  }
  T* src = static_cast<T*>(shmem_malloc(3 * sizeof(T)));
  T* dst = static_cast<T*>(shmem_malloc(3 * sizeof(T)));
  src[0] = T(T(1) << (r.me % bits));
  src[1] = T(~(T(1) << (r.me % bits)));
  src[2] = T(r.me + 1);
  shmem_barrier_all();
  EXPECT_EQ(shmem_or_reduce(SHMEM_TEAM_WORLD, dst + 0, src + 0, 1), 0);
  EXPECT_EQ(shmem_and_reduce(SHMEM_TEAM_WORLD, dst + 1, src + 1, 1), 0);
  EXPECT_EQ(shmem_xor_reduce(SHMEM_TEAM_WORLD, dst + 2, src + 2, 1), 0);
  EXPECT_EQ(dst[0], want_or);
  EXPECT_EQ(dst[1], want_and);
  EXPECT_EQ(dst[2], want_xor);
  shmem_barrier_all();
  shmem_free(dst);
  shmem_free(src);
}

// OpenSHMEM 1.6: shmem_ibput/shmem_ibget (plain and on a context) and shmem_sum_inscan/exscan
// through their overloads, for a few types of their tables. Blocks of 2 elements every 3 on the
// neighbour, every 2 here; the scans against the sum of the values of the PEs below.
using OneSixTypes = ::testing::Types<short, unsigned long, double, long double, std::ptrdiff_t>;
template <typename T>
class OneSix : public ::testing::Test {};
TYPED_TEST_SUITE(OneSix, OneSixTypes);

TYPED_TEST(OneSix, BlockTransfersAndScans) {
  using T = TypeParam;
  const Ring r;
  constexpr int kBlocks = 4, kSpan = 3 * kBlocks;
  T* w = static_cast<T*>(shmem_calloc(kSpan + 2, sizeof(T)));
  T local[2 * kBlocks], back[2 * kBlocks] = {};
  for (int k = 0; k < 2 * kBlocks; ++k) local[k] = initial<T>(r.me, k);
  shmem_barrier_all();
  shmem_ibput(w, local, 3, 2, 2, kBlocks, r.next);
  shmem_barrier_all();
  for (int e = 0; e < kSpan; ++e) {
    const T want = e % 3 == 2 ? T(0) : initial<T>(r.prev, e / 3 * 2 + e % 3);
    EXPECT_EQ(w[e], want) << "element " << e;
  }
  shmem_barrier_all();
  shmem_ibget(SHMEM_CTX_DEFAULT, back, w, 2, 3, 2, kBlocks, r.next);
  for (int k = 0; k < 2 * kBlocks; ++k) EXPECT_EQ(back[k], initial<T>(r.me, k)) << "element " << k;
  T* scan = w + kSpan;
  scan[0] = T(r.me + 1);
  shmem_barrier_all();
  EXPECT_EQ(shmem_sum_inscan(SHMEM_TEAM_WORLD, scan + 1, scan, 1), 0);
  EXPECT_EQ(scan[1], T((r.me + 1) * (r.me + 2) / 2));
  EXPECT_EQ(shmem_sum_exscan(SHMEM_TEAM_WORLD, scan, scan, 1), 0);  // in place
  EXPECT_EQ(scan[0], T(r.me * (r.me + 1) / 2));
  shmem_barrier_all();
  shmem_free(w);
}

// OpenSHMEM 1.6's shmem_signal_add and shmem_signal_set with a context first, as overloads of the
// plain functions: the neighbour sees the sum of both adds and the later set.
TEST(Signal, ContextFormsOfSignalAddAndSet) {
  const Ring r;
  auto* sig = static_cast<std::uint64_t*>(shmem_calloc(2, sizeof(std::uint64_t)));
  shmem_barrier_all();
  shmem_signal_add(SHMEM_CTX_DEFAULT, &sig[0], 3 * (r.me + 1), r.next);
  shmem_signal_add(&sig[0], 40 * (r.me + 1), r.next);
  shmem_signal_set(SHMEM_CTX_DEFAULT, &sig[1], 7 + r.me, r.next);
  shmem_quiet();
  shmem_barrier_all();
  EXPECT_EQ(shmem_signal_fetch(&sig[0]), 43u * (r.prev + 1));
  EXPECT_EQ(shmem_signal_fetch(&sig[1]), 7u + r.prev);
  shmem_barrier_all();
  shmem_free(sig);
}

}  // namespace
}  // namespace shmoe::test
