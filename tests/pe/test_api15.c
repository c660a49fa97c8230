/* OpenSHMEM 1.5 routines and rules as a C11 program sees them (-std=c11 -pedantic -Werror):
 * the generic _nbi AMOs and _vector wait/test, the generic selections the specification's
 * tables require (int32_t/int64_t bitwise AMOs, short/unsigned short wait/test, int8_t..int64_t
 * and/or/xor reductions), fair _any routines, SHMEM_CTX_INVALID in fence/quiet, zero-length
 * calls with null addresses, large shmem_align alignments, shmem_info_get_name and
 * shmem_pcontrol. Values encode the PE that sent them. Exits non-zero on a wrong result. */
#include <shmem.h>
#include <stdio.h>
#include <string.h>

#include "c_check.h"

static int me, npes, next, prev;

/* Initial value of word w of a test array on PE pe. */
#define INIT(T, pe, w) ((T)(1000 * (pe) + 10 * (w) + 1))

/* Every _nbi AMO through the generic names, plain and context forms, on the right neighbour. */
#define NBI_STANDARD(T, CTX_ARG)                                                              \
  do {                                                                                        \
    T* w = shmem_malloc(8 * sizeof(T));                                                       \
    T f[8];                                                                                   \
    for (int i = 0; i < 8; ++i) w[i] = INIT(T, me, i);                                        \
    shmem_barrier_all();                                                                      \
    shmem_atomic_fetch_nbi(CTX_ARG f + 0, w + 0, next);                                       \
    shmem_atomic_swap_nbi(CTX_ARG f + 1, w + 1, (T)(me + 5), next);                           \
    shmem_atomic_compare_swap_nbi(CTX_ARG f + 2, w + 2, INIT(T, next, 2), (T)(me + 7), next); \
    shmem_atomic_compare_swap_nbi(CTX_ARG f + 3, w + 3, (T)0, (T)99, next); /* no swap */     \
    shmem_atomic_fetch_inc_nbi(CTX_ARG f + 4, w + 4, next);                                   \
    shmem_atomic_fetch_add_nbi(CTX_ARG f + 5, w + 5, (T)(10 + me), next);                     \
    shmem_quiet();                                                                            \
    for (int i = 0; i < 6; ++i) CHECK(f[i] == INIT(T, next, i));                              \
    shmem_barrier_all();                                                                      \
    CHECK(w[0] == INIT(T, me, 0));                                                            \
    CHECK(w[1] == (T)(prev + 5));                                                             \
    CHECK(w[2] == (T)(prev + 7));                                                             \
    CHECK(w[3] == INIT(T, me, 3));                                                            \
    CHECK(w[4] == (T)(INIT(T, me, 4) + 1));                                                   \
    CHECK(w[5] == (T)(INIT(T, me, 5) + 10 + prev));                                           \
    shmem_barrier_all();                                                                      \
    shmem_free(w);                                                                            \
  } while (0)

#define NBI_EXTENDED(T, CTX_ARG)                                      \
  do {                                                                \
    T* w = shmem_malloc(2 * sizeof(T));                               \
    T f[2];                                                           \
    w[0] = INIT(T, me, 0);                                            \
    w[1] = INIT(T, me, 1);                                            \
    shmem_barrier_all();                                              \
    shmem_atomic_fetch_nbi(CTX_ARG f + 0, w + 0, next);               \
    shmem_atomic_swap_nbi(CTX_ARG f + 1, w + 1, (T)(me + 0.5), next); \
    shmem_quiet();                                                    \
    CHECK(f[0] == INIT(T, next, 0));                                  \
    CHECK(f[1] == INIT(T, next, 1));                                  \
    shmem_barrier_all();                                              \
    CHECK(w[1] == (T)(prev + 0.5));                                   \
    shmem_barrier_all();                                              \
    shmem_free(w);                                                    \
  } while (0)

/* Bitwise _nbi AMOs: each PE sets, clears and flips its own bit of every word on PE 0. */
#define NBI_BITWISE(T, CTX_ARG)                                     \
  do {                                                              \
    T* w = shmem_malloc(3 * sizeof(T));                             \
    T all = 0, f;                                                   \
    for (int pe = 0; pe < npes; ++pe) all |= (T)1 << (pe * 5 % 31); \
    const T mine = (T)1 << (me * 5 % 31);                           \
    w[0] = 0;                                                       \
    w[1] = all;                                                     \
    w[2] = all;                                                     \
    shmem_barrier_all();                                            \
    shmem_atomic_fetch_or_nbi(CTX_ARG& f, w + 0, mine, 0);          \
    shmem_quiet();                                                  \
    CHECK((f & mine) == 0);                                         \
    shmem_atomic_fetch_and_nbi(CTX_ARG& f, w + 1, (T)~mine, 0);     \
    shmem_quiet();                                                  \
    CHECK((f & mine) == mine);                                      \
    shmem_atomic_fetch_xor_nbi(CTX_ARG& f, w + 2, mine, 0);         \
    shmem_quiet();                                                  \
    CHECK((f & mine) == mine);                                      \
    shmem_barrier_all();                                            \
    if (me == 0) CHECK(w[0] == all && w[1] == 0 && w[2] == 0);      \
    shmem_barrier_all();                                            \
    shmem_free(w);                                                  \
  } while (0)

#define NO_CTX
#define DEFAULT_CTX SHMEM_CTX_DEFAULT,

static void nbi_amos(void) {
  NBI_STANDARD(int, NO_CTX);
  NBI_STANDARD(unsigned long, DEFAULT_CTX);
  NBI_STANDARD(long long, DEFAULT_CTX);
  NBI_EXTENDED(double, NO_CTX);
  NBI_EXTENDED(float, DEFAULT_CTX);
  NBI_BITWISE(int32_t, NO_CTX);
  NBI_BITWISE(int64_t, DEFAULT_CTX);
  NBI_BITWISE(unsigned int, DEFAULT_CTX);
}

/* The bitwise AMO table names int32_t and int64_t; the generic names must select them. */
static void signed_bitwise_amos(void) {
  int32_t* a = shmem_calloc(1, sizeof(int32_t));
  int64_t* b = shmem_calloc(1, sizeof(int64_t));
  shmem_barrier_all();
  shmem_atomic_or(a, (int32_t)1 << (me % 31), 0);
  (void)shmem_atomic_fetch_xor(b, (int64_t)1 << (32 + me % 31), 0);
  shmem_barrier_all();
  if (me == 0) {
    int32_t want_a = 0;
    int64_t want_b = 0;
    for (int pe = 0; pe < npes; ++pe) {
      want_a |= (int32_t)1 << (pe % 31);
      want_b ^= (int64_t)1 << (32 + pe % 31);
    }
    CHECK(shmem_atomic_fetch(a, 0) == want_a);
    CHECK(*b == want_b);
  }
  shmem_barrier_all();
  shmem_free(b);
  shmem_free(a);
}

/* short and unsigned short wait/test, scalar and _vector forms: every PE stores 100 + its
 * number into its own slot on every PE. */
#define P2P_VECTORS(T, N)                                                                          \
  do {                                                                                             \
    T* slots = shmem_calloc((size_t)npes, sizeof(T));                                              \
    T want[64], impossible[64];                                                                    \
    size_t idx[64];                                                                                \
    for (int i = 0; i < npes; ++i) {                                                               \
      want[i] = (T)(100 + i);                                                                      \
      impossible[i] = (T)7;                                                                        \
    }                                                                                              \
    CHECK(shmem_test(&slots[me], SHMEM_CMP_EQ, want[me]) == 0);                                    \
    shmem_barrier_all();                                                                           \
    for (int pe = 0; pe < npes; ++pe) shmem_##N##_p(&slots[me], want[me], pe);                     \
    shmem_wait_until(&slots[prev], SHMEM_CMP_EQ, want[prev]);                                      \
    shmem_wait_until_all_vector(slots, (size_t)npes, NULL, SHMEM_CMP_EQ, want);                    \
    CHECK(shmem_test_all_vector(slots, (size_t)npes, NULL, SHMEM_CMP_EQ, want) == 1);              \
    CHECK(shmem_test_all_vector(slots, (size_t)npes, NULL, SHMEM_CMP_EQ, impossible) == 0);        \
    /* 1.6: cmp_values is const (a const array compiles without a cast under -Werror). */          \
    const T* const_want = want;                                                                    \
    CHECK(shmem_test_all_vector(slots, (size_t)npes, NULL, SHMEM_CMP_EQ, const_want) == 1);        \
    size_t any = shmem_wait_until_any_vector(slots, (size_t)npes, NULL, SHMEM_CMP_EQ, want);       \
    CHECK(any < (size_t)npes && slots[any] == want[any]);                                          \
    any = shmem_test_any_vector(slots, (size_t)npes, NULL, SHMEM_CMP_EQ, want);                    \
    CHECK(any < (size_t)npes && slots[any] == want[any]);                                          \
    CHECK(shmem_test_any_vector(slots, (size_t)npes, NULL, SHMEM_CMP_EQ, impossible) == SIZE_MAX); \
    CHECK(shmem_wait_until_some_vector(slots, (size_t)npes, idx, NULL, SHMEM_CMP_EQ, want) ==      \
          (size_t)npes);                                                                           \
    CHECK(shmem_test_some_vector(slots, (size_t)npes, idx, NULL, SHMEM_CMP_EQ, want) ==            \
          (size_t)npes);                                                                           \
    for (int i = 0; i < npes; ++i) CHECK(idx[i] == (size_t)i);                                     \
    CHECK(shmem_test(&slots[me], SHMEM_CMP_EQ, want[me]) == 1);                                    \
    shmem_wait_until_all(slots, (size_t)npes, NULL, SHMEM_CMP_GE, (T)100);                         \
    CHECK(shmem_test_all(slots, (size_t)npes, NULL, SHMEM_CMP_LT, (T)(100 + npes)) == 1);          \
    shmem_barrier_all();                                                                           \
    shmem_free(slots);                                                                             \
  } while (0)

static void short_p2p(void) {
  P2P_VECTORS(short, short);
  P2P_VECTORS(unsigned short, ushort);
}

/* Team reductions AND, OR, XOR on int8_t .. int64_t through the generic names. */
#define BITWISE_REDUCE(T)                                                 \
  do {                                                                    \
    T* src = shmem_malloc(3 * sizeof(T));                                 \
    T* dst = shmem_malloc(3 * sizeof(T));                                 \
    const int bits = (int)(8 * sizeof(T)) - 1;                            \
    T want_or = 0, want_and = (T) ~(T)0, want_xor = 0;                    \
    for (int pe = 0; pe < npes; ++pe) {                                   \
      want_or |= (T)((T)1 << (pe % bits));                                \
      want_and &= (T) ~((T)1 << (pe % bits));                             \
      want_xor ^= (T)(pe + 1);                                            \
    }                                                                     \
    src[0] = (T)((T)1 << (me % bits));                                    \
    src[1] = (T) ~((T)1 << (me % bits));                                  \
    src[2] = (T)(me + 1);                                                 \
    shmem_barrier_all();                                                  \
    CHECK(shmem_or_reduce(SHMEM_TEAM_WORLD, dst + 0, src + 0, 1) == 0);   \
    CHECK(shmem_and_reduce(SHMEM_TEAM_WORLD, dst + 1, src + 1, 1) == 0);  \
    CHECK(shmem_xor_reduce(SHMEM_TEAM_WORLD, dst + 2, src + 2, 1) == 0);  \
    CHECK(dst[0] == want_or && dst[1] == want_and && dst[2] == want_xor); \
    shmem_barrier_all();                                                  \
    shmem_free(dst);                                                      \
    shmem_free(src);                                                      \
  } while (0)

static void signed_bitwise_reductions(void) {
  BITWISE_REDUCE(int8_t);
  BITWISE_REDUCE(int16_t);
  BITWISE_REDUCE(int32_t);
  BITWISE_REDUCE(int64_t);
}

/* Of several satisfied elements, a series of _any calls must return each of them (1.5: "a
 * series of calls ... must eventually return i"), never always the lowest. */
static void fair_any(void) {
  enum { N = 8 };
  long* flags = shmem_calloc(N, sizeof(long));
  const int satisfied[N] = {0, 1, 0, 1, 1, 0, 1, 0};
  int status[N] = {0};
  long want[N];
  for (int i = 0; i < N; ++i) {
    flags[i] = satisfied[i] ? 100 + i : 0;
    want[i] = 100 + i;
  }
  status[4] = 1; /* excluded: must never be returned */
  for (int form = 0; form < 4; ++form) {
    int seen[N] = {0};
    for (int call = 0; call < 4 * N; ++call) {
      size_t i = form == 0   ? shmem_test_any(flags, N, status, SHMEM_CMP_GT, 0L)
                 : form == 1 ? shmem_test_any_vector(flags, N, status, SHMEM_CMP_EQ, want)
                 : form == 2 ? shmem_wait_until_any(flags, N, status, SHMEM_CMP_GT, 0L)
                             : shmem_wait_until_any_vector(flags, N, status, SHMEM_CMP_EQ, want);
      CHECK(i < N);
      if (i < N) ++seen[i];
    }
    for (int i = 0; i < N; ++i) {
      const int returnable = satisfied[i] && status[i] == 0;
      if (returnable != (seen[i] > 0)) {
        fprintf(stderr, "PE %d: _any form %d: index %d returned %d times (satisfied %d)\n", me,
                form, i, seen[i], returnable);
        ++failures;
      }
    }
  }
  shmem_barrier_all();
  shmem_free(flags);
}

/* 1.5 section 9.11: fence and quiet on SHMEM_CTX_INVALID do nothing (and do not stop the PE). */
static void invalid_context(void) {
  shmem_ctx_t ctx = SHMEM_CTX_INVALID;
  shmem_ctx_fence(ctx);
  shmem_ctx_quiet(ctx);
  shmem_ctx_destroy(ctx);
  shmem_team_t team = SHMEM_TEAM_WORLD;
  CHECK(shmem_ctx_get_team(ctx, &team) != 0 && team == SHMEM_TEAM_INVALID);
}

/* A null pointer with a zero length is supported (1.5 Annex C): such calls move nothing; a
 * zero-length put-with-signal still delivers its signal. */
static void zero_length(void) {
  uint64_t* sig = shmem_calloc(4, sizeof(uint64_t));
  long* r = shmem_calloc(1, sizeof(long));
  shmem_barrier_all();
  shmem_putmem(NULL, NULL, 0, next);
  shmem_getmem(NULL, NULL, 0, next);
  shmem_putmem_nbi(NULL, NULL, 0, next);
  shmem_getmem_nbi(NULL, NULL, 0, next);
  shmem_ctx_putmem(SHMEM_CTX_DEFAULT, NULL, NULL, 0, next);
  shmem_long_put(NULL, NULL, 0, next);
  shmem_long_get(NULL, NULL, 0, next);
  shmem_put(SHMEM_CTX_DEFAULT, (long*)NULL, NULL, 0, next);
  shmem_double_put_nbi(NULL, NULL, 0, next);
  shmem_put64(NULL, NULL, 0, next);
  shmem_get128(NULL, NULL, 0, next);
  shmem_long_iput(NULL, NULL, 1, 1, 0, next);
  shmem_long_iget(NULL, NULL, 1, 1, 0, next);
  shmem_iput32(NULL, NULL, 0, 0, 0, next); /* strides are not looked at either */
  shmem_putmem_signal(NULL, NULL, 0, &sig[0], 100 + (uint64_t)me, SHMEM_SIGNAL_SET, next);
  shmem_long_put_signal_nbi(NULL, NULL, 0, &sig[1], 5, SHMEM_SIGNAL_ADD, next);
  shmem_put_signal(SHMEM_CTX_DEFAULT, (int*)NULL, NULL, 0, &sig[2], 7, SHMEM_SIGNAL_ADD, next);
  shmem_put64_signal_nbi(NULL, NULL, 0, &sig[3], 200 + (uint64_t)me, SHMEM_SIGNAL_SET, next);
  shmem_quiet();
  CHECK(shmem_long_broadcast(SHMEM_TEAM_WORLD, NULL, NULL, 0, 0) == 0);
  CHECK(shmem_broadcastmem(SHMEM_TEAM_WORLD, NULL, NULL, 0, 0) == 0);
  CHECK(shmem_long_collect(SHMEM_TEAM_WORLD, NULL, NULL, 0) == 0);
  CHECK(shmem_fcollectmem(SHMEM_TEAM_WORLD, NULL, NULL, 0) == 0);
  CHECK(shmem_int_alltoall(SHMEM_TEAM_WORLD, NULL, NULL, 0) == 0);
  CHECK(shmem_alltoallsmem(SHMEM_TEAM_WORLD, NULL, NULL, 1, 1, 0) == 0);
  CHECK(shmem_long_sum_reduce(SHMEM_TEAM_WORLD, NULL, NULL, 0) == 0);
  CHECK(shmem_uint_xor_reduce(SHMEM_TEAM_WORLD, NULL, NULL, 0) == 0);
  static long psync[SHMEM_ALLTOALL_SYNC_SIZE];
  shmem_alltoall64(NULL, NULL, 0, 0, 0, npes, psync);
  shmem_long_sum_to_all(NULL, NULL, 0, 0, 0, npes, NULL, psync);
  CHECK(shmem_malloc(0) == NULL);
  CHECK(shmem_calloc(0, 8) == NULL);
  CHECK(shmem_align(64, 0) == NULL);
  /* An alignment that is not a power of two: NULL (and a message), not the end of the job. */
  CHECK(shmem_align(0, 64) == NULL);
  CHECK(shmem_align(3, 64) == NULL);
  /* No action, hence no barrier: one PE alone may call it. */
  if (me == 0) shmem_free(NULL);
  shmem_barrier_all();
  CHECK(sig[0] == 100 + (uint64_t)prev);
  CHECK(sig[1] == 5);
  CHECK(sig[2] == 7);
  CHECK(sig[3] == 200 + (uint64_t)prev);
  shmem_long_p(r, me, next); /* the job still works afterwards */
  shmem_barrier_all();
  CHECK(*r == prev);
  shmem_barrier_all();
  shmem_free(r);
  shmem_free(sig);
}

/* shmem_align must align the address, not only the heap offset, for alignments beyond a page,
 * and the block must be usable symmetrically. Every PE's heap starts on a 1 GiB boundary, so
 * each of these alignments must succeed on every PE (and a refusal, where heaps disagree, would
 * have to be NULL on every PE, never a misaligned block). */
static void large_alignments(void) {
  const size_t alignments[] = {4096, 8192, 65536, (size_t)1 << 20, (size_t)8 << 20};
  long* got = shmem_malloc(sizeof(long));
  long* got_on = shmem_malloc(sizeof(long));
  for (size_t k = 0; k < sizeof alignments / sizeof alignments[0]; ++k) {
    long* p = shmem_align(alignments[k], 3 * sizeof(long));
    *got = p != NULL;
    CHECK(shmem_long_sum_reduce(SHMEM_TEAM_WORLD, got_on, got, 1) == 0);
    CHECK(*got_on == 0 || *got_on == npes);
    CHECK(p != NULL);
    if (p == NULL) continue;
    if ((uintptr_t)p % alignments[k] != 0) {
      fprintf(stderr, "PE %d: shmem_align(%zu) returned %p\n", me, alignments[k], (void*)p);
      ++failures;
    }
    shmem_long_p(p + 2, 1000L * me + (long)k, next);
    shmem_barrier_all();
    CHECK(p[2] == 1000L * prev + (long)k);
    shmem_free(p);
  }
  shmem_free(got_on);
  shmem_free(got);
}

static void name_and_pcontrol(void) {
  char name[SHMEM_MAX_NAME_LEN];
  memset(name, 'x', sizeof name);
  shmem_info_get_name(name);
  CHECK(strcmp(name, SHMEM_VENDOR_STRING) == 0);
  /* The library makes no use of the levels; every recommended one must return. */
  shmem_pcontrol(0);
  shmem_pcontrol(1);
  shmem_pcontrol(2);
  shmem_pcontrol(3, "user event", 42);
}

int main(void) {
  shmem_init();
  me = shmem_my_pe();
  npes = shmem_n_pes();
  next = (me + 1) % npes;
  prev = (me + npes - 1) % npes;
  if (npes > 64) {
    fprintf(stderr, "at most 64 PEs\n");
    shmem_global_exit(2);
  }
  nbi_amos();
  signed_bitwise_amos();
  short_p2p();
  signed_bitwise_reductions();
  fair_any();
  invalid_context();
  zero_length();
  large_alignments();
  name_and_pcontrol();
  shmem_finalize();
  if (failures == 0) printf("PE %d: all checks passed\n", me);
  return failures != 0;
}
