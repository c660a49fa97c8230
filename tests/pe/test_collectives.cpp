// Collectives on teams and active sets: every result is checked against what this PE computes
// locally from the (random, seeded) inputs of every member.
#include <gtest/gtest.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "pe_test.hpp"
#include "team_helpers.hpp"

namespace shmoe::test {
namespace {

int world_of(shmem_team_t team, int index) {
  return shmem_team_translate_pe(team, index, SHMEM_TEAM_WORLD);
}

// Runs `body` on each test team this PE is in, with a world barrier after each team (an ASSERT
// leaves only the body, so a failure does not leave the other PEs waiting).
template <typename Body>
void for_each_team(Body&& body) {
  for (const TestTeam& tt : test_teams()) {
    if (tt.team != SHMEM_TEAM_INVALID) {
      SCOPED_TRACE(tt.name);
      body(tt);
    }
    shmem_barrier_all();
  }
}

template <typename T>
struct CollFns {
  int (*broadcast)(shmem_team_t, T*, const T*, size_t, int);
  int (*collect)(shmem_team_t, T*, const T*, size_t);
  int (*fcollect)(shmem_team_t, T*, const T*, size_t);
  int (*alltoall)(shmem_team_t, T*, const T*, size_t);
  int (*alltoalls)(shmem_team_t, T*, const T*, ptrdiff_t, ptrdiff_t, size_t);
};

template <typename T>
void run_collectives(const CollFns<T>& f) {
  const std::uint64_t seed = shared_seed();
  const int n = shmem_n_pes(), me = shmem_my_pe();
  const std::size_t max_elems = 300;
  // dest of the largest case (alltoalls: n blocks of max_elems at stride 2) on every PE.
  T* src = static_cast<T*>(shmem_malloc(sizeof(T) * max_elems * n * 2));
  T* dst = static_cast<T*>(shmem_malloc(sizeof(T) * max_elems * n * 2));
  // Teams overlap: a barrier after each keeps one team's writes out of another's checks.
  for_each_team([&](const TestTeam& tt) {
    const int size = std::max(1, shmem_team_n_pes(tt.team)), my = shmem_team_my_pe(tt.team);
    for (std::size_t nelems : {std::size_t{1}, std::size_t{97}, max_elems}) {
      // Broadcast from every root: dest on every member (the root included) is the root's data.
      for (int root = 0; root < size; ++root) {
        for (std::size_t i = 0; i < nelems; ++i) src[i] = encode<T>(seed, me, root, i);
        ASSERT_EQ(f.broadcast(tt.team, dst, src, nelems, root), 0);
        for (std::size_t i = 0; i < nelems; ++i) {
          ASSERT_TRUE(same(dst[i], encode<T>(seed, world_of(tt.team, root), root, i)))
              << "broadcast root " << root << " element " << i;
        }
        // dest must be ready before any member starts the next call (the user's duty).
        shmem_team_sync(tt.team);
      }
      // fcollect: member j's block at j * nelems.
      for (std::size_t i = 0; i < nelems; ++i) src[i] = encode<T>(seed, me, 1, i);
      ASSERT_EQ(f.fcollect(tt.team, dst, src, nelems), 0);
      for (int j = 0; j < size; ++j) {
        for (std::size_t i = 0; i < nelems; ++i) {
          ASSERT_TRUE(same(dst[j * nelems + i], encode<T>(seed, world_of(tt.team, j), 1, i)))
              << "fcollect block " << j << " element " << i;
        }
      }
      shmem_team_sync(tt.team);
      // collect: member j contributes (j * 7 + nelems) % 13 elements (some none), packed.
      auto count = [&](int j) { return static_cast<std::size_t>((j * 7 + nelems) % 13); };
      for (std::size_t i = 0; i < count(my); ++i) src[i] = encode<T>(seed, me, 2, i);
      ASSERT_EQ(f.collect(tt.team, dst, src, count(my)), 0);
      std::size_t at = 0;
      for (int j = 0; j < size; ++j) {
        for (std::size_t i = 0; i < count(j); ++i, ++at) {
          ASSERT_TRUE(same(dst[at], encode<T>(seed, world_of(tt.team, j), 2, i)))
              << "collect block " << j << " element " << i;
        }
      }
      shmem_team_sync(tt.team);
      // alltoall: block j of member k lands in member j's dest at k.
      for (int j = 0; j < size; ++j) {
        for (std::size_t i = 0; i < nelems; ++i) {
          src[j * nelems + i] = encode<T>(seed, me, world_of(tt.team, j), i);
        }
      }
      ASSERT_EQ(f.alltoall(tt.team, dst, src, nelems), 0);
      for (int k = 0; k < size; ++k) {
        for (std::size_t i = 0; i < nelems; ++i) {
          ASSERT_TRUE(same(dst[k * nelems + i], encode<T>(seed, world_of(tt.team, k), me, i)))
              << "alltoall from " << k << " element " << i;
        }
      }
      shmem_team_sync(tt.team);
      // alltoalls with source stride 1 and dest stride 2: the gaps stay untouched.
      const std::size_t m = std::min<std::size_t>(nelems, 50);
      const T marker = encode<T>(seed, 99, 99, 99);
      std::fill(dst, dst + m * static_cast<std::size_t>(size) * 2, marker);
      for (int j = 0; j < size; ++j) {
        for (std::size_t i = 0; i < m; ++i) {
          src[j * m + i] = encode<T>(seed, me, world_of(tt.team, j) + 50, i);
        }
      }
      shmem_team_sync(tt.team);  // every dest is reset before anyone writes into it
      ASSERT_EQ(f.alltoalls(tt.team, dst, src, 2, 1, m), 0);
      for (int k = 0; k < size; ++k) {
        for (std::size_t i = 0; i < m; ++i) {
          ASSERT_TRUE(same(dst[(k * m + i) * 2], encode<T>(seed, world_of(tt.team, k), me + 50, i)))
              << "alltoalls from " << k << " element " << i;
          ASSERT_TRUE(same(dst[(k * m + i) * 2 + 1], marker)) << "alltoalls wrote into a gap";
        }
      }
      shmem_team_sync(tt.team);
    }
  });
  shmem_free(dst);
  shmem_free(src);
}

#define COLLECTIVE_TEST(T, N)                                                             \
  TEST(TeamCollectives, N) {                                                              \
    run_collectives<T>({shmem_##N##_broadcast, shmem_##N##_collect, shmem_##N##_fcollect, \
                        shmem_##N##_alltoall, shmem_##N##_alltoalls});                    \
  }
SHMOE_RMA_TYPES(COLLECTIVE_TEST)

// The untyped forms move bytes; odd sizes catch element-size assumptions.
TEST(TeamCollectives, MemForms) {
  const std::uint64_t seed = shared_seed();
  const int n = shmem_n_pes(), me = shmem_my_pe();
  const std::size_t bytes = 13;
  auto* src = static_cast<unsigned char*>(shmem_malloc(bytes * n));
  auto* dst = static_cast<unsigned char*>(shmem_malloc(bytes * n * 2));
  for_each_team([&](const TestTeam& tt) {
    const int size = shmem_team_n_pes(tt.team);
    for (std::size_t i = 0; i < bytes * n; ++i) src[i] = encode<unsigned char>(seed, me, 0, i);
    ASSERT_EQ(shmem_broadcastmem(tt.team, dst, src, bytes, size - 1), 0);
    for (std::size_t i = 0; i < bytes; ++i) {
      ASSERT_EQ(dst[i], encode<unsigned char>(seed, world_of(tt.team, size - 1), 0, i));
    }
    shmem_team_sync(tt.team);
    ASSERT_EQ(shmem_fcollectmem(tt.team, dst, src, bytes), 0);
    ASSERT_EQ(shmem_collectmem(tt.team, dst + bytes * size, src, bytes), 0);
    for (int j = 0; j < size; ++j) {
      for (std::size_t i = 0; i < bytes; ++i) {
        ASSERT_EQ(dst[j * bytes + i], encode<unsigned char>(seed, world_of(tt.team, j), 0, i));
        ASSERT_EQ(dst[(size + j) * bytes + i],
                  encode<unsigned char>(seed, world_of(tt.team, j), 0, i));
      }
    }
    shmem_team_sync(tt.team);
    const std::size_t block = bytes / 2;  // alltoallmem: blocks of 6 bytes
    ASSERT_EQ(shmem_alltoallmem(tt.team, dst, src, block), 0);
    const int my = shmem_team_my_pe(tt.team);
    for (int k = 0; k < size; ++k) {
      for (std::size_t i = 0; i < block; ++i) {
        ASSERT_EQ(dst[k * block + i],
                  encode<unsigned char>(seed, world_of(tt.team, k), 0, my * block + i));
      }
    }
    shmem_team_sync(tt.team);
    ASSERT_EQ(shmem_alltoallsmem(tt.team, dst, src, 1, 1, block), 0);
    for (int k = 0; k < size; ++k) {
      for (std::size_t i = 0; i < block; ++i) {
        ASSERT_EQ(dst[k * block + i],
                  encode<unsigned char>(seed, world_of(tt.team, k), 0, my * block + i));
      }
    }
  });
  shmem_free(dst);
  shmem_free(src);
}

TEST(TeamCollectives, InvalidTeamReturnsNonzero) {
  long x = 0, y = 0;
  EXPECT_NE(shmem_long_broadcast(SHMEM_TEAM_INVALID, &x, &y, 1, 0), 0);
  EXPECT_NE(shmem_long_sum_reduce(SHMEM_TEAM_INVALID, &x, &y, 1), 0);
  EXPECT_NE(shmem_long_fcollect(SHMEM_TEAM_INVALID, &x, &y, 1), 0);
  EXPECT_NE(shmem_team_sync(SHMEM_TEAM_INVALID), 0);
  EXPECT_NE(shmem_long_broadcast(SHMEM_TEAM_WORLD, &x, &y, 1, shmem_n_pes()), 0);  // bad root
}

// ---- Reductions ---------------------------------------------------------------------------

enum class Op { kAnd, kOr, kXor, kMax, kMin, kSum, kProd };

template <typename T>
constexpr bool is_complex_v = !std::is_arithmetic_v<T>;

// Inputs: full-range integers; small integers for floating and complex types, so that sums and
// products are exact in any order.
template <typename T>
T input(std::uint64_t seed, int pe, std::size_t i) {
  if constexpr (std::is_integral_v<T>) {
    return encode<T>(seed, pe, 7, i);
  } else {
    const std::uint64_t h = mix(seed ^ mix((std::uint64_t(pe) << 32) ^ i));
    if constexpr (is_complex_v<T>) {
      T v;
      __real__ v = static_cast<float>(static_cast<int>(h % 7) - 3);
      __imag__ v = static_cast<float>(static_cast<int>((h >> 8) % 5) - 2);
      return v;
    } else {
      return static_cast<T>(static_cast<int>(h % 7) - 3);
    }
  }
}

template <typename T>
T apply(Op op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    switch (op) {
      case Op::kAnd:
        return a & b;
      case Op::kOr:
        return a | b;
      case Op::kXor:
        return a ^ b;
      case Op::kMax:
        return std::max(a, b);
      case Op::kMin:
        return std::min(a, b);
      case Op::kSum:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case Op::kProd:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    }
  } else if constexpr (is_complex_v<T>) {
    return op == Op::kSum ? a + b : a * b;
  } else {
    switch (op) {
      case Op::kMax:
        return std::max(a, b);
      case Op::kMin:
        return std::min(a, b);
      case Op::kSum:
        return a + b;
      default:
        return a * b;
    }
  }
  return a;
}

template <typename T>
using ReduceFn = int (*)(shmem_team_t, T*, const T*, size_t);

// Each size: one element, a partial chunk, several chunks of the double-buffered pipeline; the
// last size runs in place (dest == source).
template <typename T>
void run_reduction(Op op, ReduceFn<T> fn) {
  const std::uint64_t seed = shared_seed();
  const int me = shmem_my_pe();
  const std::size_t sizes[] = {1, 100, 2000};
  T* src = static_cast<T*>(shmem_malloc(sizeof(T) * 2000));
  T* dst = static_cast<T*>(shmem_malloc(sizeof(T) * 2000));
  for (const TestTeam& tt : test_teams()) {
    if (tt.team == SHMEM_TEAM_INVALID) continue;
    SCOPED_TRACE(tt.name);
    const int size = shmem_team_n_pes(tt.team);
    for (std::size_t n : sizes) {
      const bool in_place = n == 2000;
      for (std::size_t i = 0; i < n; ++i) src[i] = input<T>(seed + n, me, i);
      T* out = in_place ? src : dst;
      ASSERT_EQ(fn(tt.team, out, src, n), 0);
      for (std::size_t i = 0; i < n; ++i) {
        T want = input<T>(seed + n, world_of(tt.team, 0), i);
        for (int j = 1; j < size; ++j)
          want = apply(op, want, input<T>(seed + n, world_of(tt.team, j), i));
        ASSERT_TRUE(out[i] == want)
            << "element " << i << " of " << n << (in_place ? " in place" : "");
      }
    }
  }
  shmem_free(dst);
  shmem_free(src);
}

#define REDUCE_TEST(T, N, OP, OPNAME)                        \
  TEST(TeamReduce, N##_##OPNAME) {                           \
    run_reduction<T>(Op::OP, shmem_##N##_##OPNAME##_reduce); \
  }
#define REDUCE_BITWISE(T, N) \
  REDUCE_TEST(T, N, kAnd, and) REDUCE_TEST(T, N, kOr, or) REDUCE_TEST(T, N, kXor, xor)
#define REDUCE_MINMAX(T, N) REDUCE_TEST(T, N, kMax, max) REDUCE_TEST(T, N, kMin, min)
#define REDUCE_ARITH(T, N) REDUCE_TEST(T, N, kSum, sum) REDUCE_TEST(T, N, kProd, prod)
SHMOE_REDUCE_BITWISE_TYPES(REDUCE_BITWISE)
SHMOE_REDUCE_MINMAX_TYPES(REDUCE_MINMAX)
SHMOE_REDUCE_ARITH_TYPES(REDUCE_ARITH)

// ---- Deprecated active-set forms ------------------------------------------------------------

// The active sets: everyone, and every second PE from 0 (logPE_stride 1).
TEST(ActiveSet, ReductionsBroadcastCollectAlltoall) {
  const std::uint64_t seed = shared_seed();
  const int n = shmem_n_pes(), me = shmem_my_pe();
  long* psync = static_cast<long*>(shmem_malloc(sizeof(long) * SHMEM_REDUCE_SYNC_SIZE));
  long* pwrk = static_cast<long*>(shmem_malloc(sizeof(long) * SHMEM_REDUCE_MIN_WRKDATA_SIZE * 64));
  auto* src = static_cast<std::uint64_t*>(shmem_malloc(8 * 64 * n));
  auto* dst = static_cast<std::uint64_t*>(shmem_malloc(8 * 64 * n));
  struct Set {
    int start, log_stride, size;
  };
  for (Set s : {Set{0, 0, n}, Set{0, 1, (n + 1) / 2}}) {
    const int stride = 1 << s.log_stride;
    if (me % stride != 0) continue;
    const int my = me / stride;
    // sum_to_all over long.
    long* lsrc = reinterpret_cast<long*>(src);
    long* ldst = reinterpret_cast<long*>(dst);
    for (int i = 0; i < 40; ++i) lsrc[i] = static_cast<long>(encode<int>(seed, me, 0, i) % 1000);
    shmem_long_sum_to_all(ldst, lsrc, 40, s.start, s.log_stride, s.size, pwrk, psync);
    for (int i = 0; i < 40; ++i) {
      long want = 0;
      for (int j = 0; j < s.size; ++j) want += encode<int>(seed, j * stride, 0, i) % 1000;
      ASSERT_EQ(ldst[i], want) << "sum_to_all element " << i;
    }
    shmem_sync(s.start, s.log_stride, s.size, psync);
    shmem_long_max_to_all(ldst, lsrc, 40, s.start, s.log_stride, s.size, pwrk, psync);
    for (int i = 0; i < 40; ++i) {
      long want = lsrc[i];
      for (int j = 0; j < s.size; ++j) {
        want = std::max<long>(want, encode<int>(seed, j * stride, 0, i) % 1000);
      }
      ASSERT_EQ(ldst[i], want) << "max_to_all element " << i;
    }
    // broadcast64 from the last member: the root's dest is not written (active-set semantics).
    const int root = s.size - 1;
    for (int i = 0; i < 10; ++i) {
      src[i] = encode<std::uint64_t>(seed, me, 1, i);
      dst[i] = 0;
    }
    shmem_barrier(s.start, s.log_stride, s.size, psync);
    shmem_broadcast64(dst, src, 10, root, s.start, s.log_stride, s.size, psync);
    for (int i = 0; i < 10; ++i) {
      ASSERT_EQ(dst[i], my == root ? 0 : encode<std::uint64_t>(seed, root * stride, 1, i));
    }
    shmem_sync(s.start, s.log_stride, s.size, psync);
    // fcollect32 and collect64.
    auto* s32 = reinterpret_cast<std::uint32_t*>(src);
    auto* d32 = reinterpret_cast<std::uint32_t*>(dst);
    for (int i = 0; i < 3; ++i) s32[i] = encode<std::uint32_t>(seed, me, 2, i);
    shmem_fcollect32(d32, s32, 3, s.start, s.log_stride, s.size, psync);
    for (int j = 0; j < s.size; ++j) {
      for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(d32[j * 3 + i], encode<std::uint32_t>(seed, j * stride, 2, i));
      }
    }
    shmem_sync(s.start, s.log_stride, s.size, psync);
    for (int i = 0; i < my + 1; ++i) src[i] = encode<std::uint64_t>(seed, me, 3, i);
    shmem_collect64(dst, src, my + 1, s.start, s.log_stride, s.size, psync);
    int at = 0;
    for (int j = 0; j < s.size; ++j) {
      for (int i = 0; i < j + 1; ++i, ++at) {
        ASSERT_EQ(dst[at], encode<std::uint64_t>(seed, j * stride, 3, i));
      }
    }
    shmem_sync(s.start, s.log_stride, s.size, psync);
    // alltoall64.
    for (int j = 0; j < s.size; ++j) src[j] = encode<std::uint64_t>(seed, me, j, 4);
    shmem_alltoall64(dst, src, 1, s.start, s.log_stride, s.size, psync);
    for (int k = 0; k < s.size; ++k) {
      ASSERT_EQ(dst[k], encode<std::uint64_t>(seed, k * stride, my, 4));
    }
    shmem_sync(s.start, s.log_stride, s.size, psync);
  }
  shmem_barrier_all();
  shmem_free(dst);
  shmem_free(src);
  shmem_free(pwrk);
  shmem_free(psync);
}

// More distinct active sets than the library has slots for (SHMOE_MAX_ACTIVE_SETS, or fewer under
// SHMOE_ACTIVE_SET_SLOTS), as old programs that walk over active sets use: each phase splits the
// PEs into disjoint sets that run at once (runs of 1..n PEs, then every 2nd and every 4th PE from
// each start), and the phases are gone through twice, so sets give their slots up to others and
// later get one back. Each set's sum_to_all, broadcast64 and fcollect64 results are checked.
TEST(ActiveSet, SetsOutnumberingTheSlots) {
  const std::uint64_t seed = shared_seed();
  const int n = shmem_n_pes(), me = shmem_my_pe();
  struct Set {
    int start, log_stride, size;
  };
  // Each phase: this PE's set in one partition of the PEs into strided sets.
  std::vector<Set> phases;
  for (int run = 1; run <= n; ++run) {
    const int start = me / run * run;
    phases.push_back({start, 0, std::min(run, n - start)});
  }
  for (int log_stride = 1; (1 << log_stride) < n && log_stride <= 2; ++log_stride) {
    const int stride = 1 << log_stride, start = me % stride;
    phases.push_back({start, log_stride, (n - start + stride - 1) / stride});
  }
  constexpr int kCount = 24;
  long* psync_reduce = static_cast<long*>(shmem_malloc(sizeof(long) * SHMEM_REDUCE_SYNC_SIZE));
  long* psync_bcast = static_cast<long*>(shmem_malloc(sizeof(long) * SHMEM_BCAST_SYNC_SIZE));
  long* psync_collect = static_cast<long*>(shmem_malloc(sizeof(long) * SHMEM_COLLECT_SYNC_SIZE));
  long* pwrk = static_cast<long*>(
      shmem_malloc(sizeof(long) * (kCount / 2 + 1 + SHMEM_REDUCE_MIN_WRKDATA_SIZE)));
  // A destination per call: a fast member's next call writes while this PE still checks.
  auto* src = static_cast<long*>(shmem_malloc(sizeof(long) * kCount));
  auto* sum = static_cast<long*>(shmem_malloc(sizeof(long) * kCount));
  auto* bcast = static_cast<long*>(shmem_malloc(sizeof(long) * kCount));
  auto* all = static_cast<long*>(shmem_malloc(sizeof(long) * kCount * n));
  for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; ++i) psync_reduce[i] = SHMEM_SYNC_VALUE;
  for (int i = 0; i < SHMEM_BCAST_SYNC_SIZE; ++i) psync_bcast[i] = SHMEM_SYNC_VALUE;
  for (int i = 0; i < SHMEM_COLLECT_SYNC_SIZE; ++i) psync_collect[i] = SHMEM_SYNC_VALUE;
  shmem_barrier_all();
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t phase = 0; phase < phases.size(); ++phase) {
      const Set s = phases[phase];
      const int stride = 1 << s.log_stride, my = (me - s.start) / stride;
      const int tag = static_cast<int>(phase) * 2 + pass;
      auto value = [&](int pe, int i) { return encode<long>(seed, pe, tag, i) % 100000; };
      for (int i = 0; i < kCount; ++i) {
        src[i] = value(me, i);
        bcast[i] = -1;  // before this PE enters the set's first call, so before any broadcast
      }
      shmem_long_sum_to_all(sum, src, kCount, s.start, s.log_stride, s.size, pwrk, psync_reduce);
      for (int i = 0; i < kCount; ++i) {
        long want = 0;
        for (int j = 0; j < s.size; ++j) want += value(s.start + j * stride, i);
        ASSERT_EQ(sum[i], want) << "sum_to_all, phase " << phase << " pass " << pass << " element "
                                << i;
      }
      const int root = tag % s.size;
      shmem_broadcast64(bcast, src, kCount, root, s.start, s.log_stride, s.size, psync_bcast);
      for (int i = 0; i < kCount; ++i) {
        ASSERT_EQ(bcast[i], my == root ? -1 : value(s.start + root * stride, i))
            << "broadcast64, phase " << phase << " pass " << pass << " element " << i;
      }
      shmem_fcollect64(all, src, kCount, s.start, s.log_stride, s.size, psync_collect);
      for (int j = 0; j < s.size; ++j) {
        for (int i = 0; i < kCount; ++i) {
          ASSERT_EQ(all[j * kCount + i], value(s.start + j * stride, i))
              << "fcollect64, phase " << phase << " pass " << pass << " block " << j;
        }
      }
      shmem_barrier_all();  // the next phase's sets reuse the pSync arrays
    }
  }
  shmem_free(all);
  shmem_free(bcast);
  shmem_free(sum);
  shmem_free(src);
  shmem_free(pwrk);
  shmem_free(psync_collect);
  shmem_free(psync_bcast);
  shmem_free(psync_reduce);
}

}  // namespace
}  // namespace shmoe::test
