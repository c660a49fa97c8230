// Puts and gets of every standard RMA type, every sized form and putmem, from every PE to every
// PE, with values that encode (seed, source, destination, index).
#include <gtest/gtest.h>

#include <vector>

#include "pe_test.hpp"

namespace shmoe::test {
namespace {

template <typename T>
struct RmaOps {
  void (*put)(T*, const T*, size_t, int);
  void (*put_nbi)(T*, const T*, size_t, int);
  void (*get)(T*, const T*, size_t, int);
  void (*get_nbi)(T*, const T*, size_t, int);
  void (*p)(T*, T, int);
  T (*g)(const T*, int);
  void (*iput)(T*, const T*, ptrdiff_t, ptrdiff_t, size_t, int);
  void (*iget)(T*, const T*, ptrdiff_t, ptrdiff_t, size_t, int);
  void (*put_signal)(T*, const T*, size_t, uint64_t*, uint64_t, int, int);
};

// dest on every PE holds one row of `len` elements per source PE.
template <typename T>
void check_rows(const T* rows, std::size_t len, std::uint64_t seed, int me, int n, int salt,
                const char* what) {
  for (int src = 0; src < n; ++src) {
    for (std::size_t i = 0; i < len; ++i) {
      T want = encode<T>(seed + salt, src, me, i);
      ASSERT_TRUE(same(rows[src * len + i], want))
          << what << ": element " << i << " from PE " << src << " is wrong at PE " << me;
    }
  }
}

template <typename T>
void run_rma(const RmaOps<T>& ops) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  const std::uint64_t seed = shared_seed();
  const std::size_t len = 1 + mix(seed) % 97;  // same on every PE
  T* rows = static_cast<T*>(shmem_calloc(n * len * 3, sizeof(T)));
  uint64_t* sig = static_cast<uint64_t*>(shmem_calloc(1, sizeof(uint64_t)));
  ASSERT_NE(rows, nullptr);
  std::vector<T> src(len * 3);

  // put / put_nbi / put_signal: PE me writes its row at every destination.
  int salt = 0;
  for (auto* put : {ops.put, ops.put_nbi}) {
    ++salt;
    for (int dst = 0; dst < n; ++dst) {
      for (std::size_t i = 0; i < len; ++i) src[i] = encode<T>(seed + salt, me, dst, i);
      put(rows + me * len, src.data(), len, dst);
      shmem_quiet();  // an _nbi put may read `src` until quiet (over UCX it does)
    }
    shmem_barrier_all();
    check_rows(rows, len, seed, me, n, salt, salt == 1 ? "put" : "put_nbi");
    shmem_barrier_all();
  }
  ++salt;
  for (int dst = 0; dst < n; ++dst) {
    for (std::size_t i = 0; i < len; ++i) src[i] = encode<T>(seed + salt, me, dst, i);
    ops.put_signal(rows + me * len, src.data(), len, sig, 1, SHMEM_SIGNAL_ADD, dst);
  }
  shmem_signal_wait_until(sig, SHMEM_CMP_EQ, static_cast<uint64_t>(n));
  check_rows(rows, len, seed, me, n, salt, "put_signal");
  shmem_barrier_all();

  // get / get_nbi: every PE publishes rows addressed to each reader; each reader fetches its own.
  ++salt;
  for (int dst = 0; dst < n; ++dst) {
    for (std::size_t i = 0; i < len; ++i) rows[dst * len + i] = encode<T>(seed + salt, me, dst, i);
  }
  shmem_barrier_all();
  std::vector<T> got(n * len);
  for (int from = 0; from < n; ++from) {
    (from % 2 ? ops.get_nbi : ops.get)(got.data() + from * len, rows + me * len, len, from);
  }
  shmem_quiet();
  check_rows(got.data(), len, seed, me, n, salt, "get");
  shmem_barrier_all();

  // p / g on single elements.
  ++salt;
  for (int dst = 0; dst < n; ++dst) ops.p(rows + me, encode<T>(seed + salt, me, dst, 0), dst);
  shmem_barrier_all();
  for (int from = 0; from < n; ++from) {
    EXPECT_TRUE(same(rows[from], encode<T>(seed + salt, from, me, 0))) << "p from PE " << from;
    EXPECT_TRUE(same(ops.g(rows + me, from), encode<T>(seed + salt, me, from, 0)))
        << "g from PE " << from;
  }
  shmem_barrier_all();

  // iput with destination stride 3 and source stride 2; iget back with the strides swapped.
  ++salt;
  std::fill(rows, rows + n * len * 3, T{});
  shmem_barrier_all();
  const int peer = (me + 1) % n;
  for (std::size_t i = 0; i < len; ++i) src[2 * i] = encode<T>(seed + salt, me, peer, i);
  ops.iput(rows + me * len * 3, src.data(), 3, 2, len, peer);
  shmem_barrier_all();
  const int writer = (me + n - 1) % n;
  for (std::size_t i = 0; i < len; ++i) {
    ASSERT_TRUE(same(rows[writer * len * 3 + 3 * i], encode<T>(seed + salt, writer, me, i)))
        << "iput element " << i;
    if (i + 1 < len) {
      ASSERT_TRUE(same(rows[writer * len * 3 + 3 * i + 1], T{})) << "iput wrote between strides";
    }
  }
  std::vector<T> back(2 * len);
  ops.iget(back.data(), rows + me * len * 3, 2, 3, len, peer);
  for (std::size_t i = 0; i < len; ++i) {
    ASSERT_TRUE(same(back[2 * i], encode<T>(seed + salt, me, peer, i))) << "iget element " << i;
  }
  shmem_barrier_all();
  shmem_free(sig);
  shmem_free(rows);
}

#define RMA_TEST(T, N)                                                                      \
  TEST(Rma, N) {                                                                            \
    run_rma<T>({shmem_##N##_put, shmem_##N##_put_nbi, shmem_##N##_get, shmem_##N##_get_nbi, \
                shmem_##N##_p, shmem_##N##_g, shmem_##N##_iput, shmem_##N##_iget,           \
                shmem_##N##_put_signal});                                                   \
  }
SHMOE_RMA_TYPES(RMA_TEST)

// The sized forms move opaque elements of BITS bits; they are checked as byte patterns.
template <std::size_t Bytes>
struct Blob {
  unsigned char b[Bytes];
};

template <std::size_t Bytes>
void run_sized(void (*put)(void*, const void*, size_t, int),
               void (*get)(void*, const void*, size_t, int),
               void (*iput)(void*, const void*, ptrdiff_t, ptrdiff_t, size_t, int)) {
  using B = Blob<Bytes>;
  const int me = shmem_my_pe(), n = shmem_n_pes();
  const std::uint64_t seed = shared_seed();
  const std::size_t len = 1 + mix(seed + Bytes) % 200;
  B* rows = static_cast<B*>(shmem_calloc(n * len * 2, sizeof(B)));
  std::vector<B> src(len * 2);
  for (int dst = 0; dst < n; ++dst) {
    for (std::size_t i = 0; i < len; ++i) src[i] = encode<B>(seed, me, dst, i);
    put(rows + me * len, src.data(), len, dst);
    shmem_quiet();  // an _nbi put may read `src` until quiet (over UCX it does)
  }
  shmem_barrier_all();
  check_rows(rows, len, seed, me, n, 0, "putSIZE");
  std::vector<B> got(len);
  const int peer = (me + 1) % n;
  get(got.data(), rows + me * len, len, peer);  // what I wrote to `peer`
  shmem_quiet();                                // an _nbi get has landed only after quiet
  for (std::size_t i = 0; i < len; ++i) {
    ASSERT_TRUE(same(got[i], encode<B>(seed, me, peer, i))) << "getSIZE element " << i;
  }
  shmem_barrier_all();
  for (std::size_t i = 0; i < len; ++i) src[i] = encode<B>(seed + 1, me, peer, i);
  iput(rows + n * len, src.data(), 2, 1, len / 2, peer);
  shmem_barrier_all();
  const int writer = (me + n - 1) % n;
  for (std::size_t i = 0; i < len / 2; ++i) {
    ASSERT_TRUE(same(rows[n * len + 2 * i], encode<B>(seed + 1, writer, me, i)))
        << "iputSIZE " << i;
  }
  shmem_barrier_all();
  shmem_free(rows);
}

#define SIZED_TEST(BITS, T)                                                               \
  TEST(RmaSized, Put##BITS) {                                                             \
    run_sized<sizeof(T)>(shmem_put##BITS, shmem_get##BITS, shmem_iput##BITS);             \
  }                                                                                       \
  TEST(RmaSized, Put##BITS##Nbi) {                                                        \
    run_sized<sizeof(T)>(shmem_put##BITS##_nbi, shmem_get##BITS##_nbi, shmem_iput##BITS); \
  }
SHMOE_RMA_SIZES(SIZED_TEST)
TEST(RmaSized, Putmem) {
  run_sized<1>(shmem_putmem, shmem_getmem, shmem_iput8);
}
TEST(RmaSized, PutmemNbi) {
  run_sized<1>(shmem_putmem_nbi, shmem_getmem_nbi, shmem_iput8);
}

// Large transfers (past 16 MiB puts use non-temporal stores) arrive whole, unaligned ends too.
TEST(RmaLarge, MultiMegabytePutAndGet) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  const std::uint64_t seed = shared_seed();
  const std::size_t words = (17u << 20) / 8 + mix(seed) % 1000;
  auto* buf = static_cast<std::uint64_t*>(shmem_malloc(words * 8));
  std::vector<std::uint64_t> src(words);
  const int peer = (me + 1) % n, writer = (me + n - 1) % n;
  for (std::size_t i = 0; i < words; ++i) src[i] = encode<std::uint64_t>(seed, me, peer, i);
  shmem_putmem(buf, src.data(), words * 8, peer);
  shmem_barrier_all();
  for (std::size_t i = 0; i < words; ++i) {
    ASSERT_EQ(buf[i], encode<std::uint64_t>(seed, writer, me, i)) << "word " << i;
  }
  std::vector<std::uint64_t> got(words);
  shmem_getmem(got.data(), buf, words * 8, peer);
  for (std::size_t i = 0; i < words; ++i) {
    ASSERT_EQ(got[i], encode<std::uint64_t>(seed, me, peer, i)) << "get word " << i;
  }
  shmem_barrier_all();
  shmem_free(buf);
}

}  // namespace
}  // namespace shmoe::test
