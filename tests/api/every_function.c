/* Takes the address of every function of the OpenSHMEM 1.5 C API, with the type lists written
 * out here from the specification's tables (independently of shmoe's own type tables), so a
 * function that is missing, misnamed or declared with the wrong signature fails to compile or to
 * link. Run as one PE, it also checks that the table holds no null entry. */
#include <shmem.h>
#include <stdio.h>

typedef void (*any_fn)(void);
#define F(name) (any_fn) & name,

/* Table 5: standard RMA types, as TYPENAME. */
#define RMA(X)                                                                                  \
  X(float) X(double) X(longdouble) X(char) X(schar) X(short) X(int) X(long) X(longlong)       \
  X(uchar) X(ushort) X(uint) X(ulong) X(ulonglong) X(int8) X(int16) X(int32) X(int64) X(uint8) \
  X(uint16) X(uint32) X(uint64) X(size) X(ptrdiff)
/* Table 6, 7, 8: standard, extended and bitwise AMO types. */
#define AMO_STD(X) \
  X(int) X(long) X(longlong) X(uint) X(ulong) X(ulonglong) X(int32) X(int64) X(uint32) X(uint64) X(size) X(ptrdiff)
#define AMO_EXT(X) X(float) X(double) AMO_STD(X)
#define AMO_BIT(X) X(uint) X(ulong) X(ulonglong) X(int32) X(int64) X(uint32) X(uint64)
/* Table 11: point-to-point synchronization types. */
#define P2P(X) AMO_STD(X)
/* Table 10: reduction types. */
#define RED_BIT(X)                                                                         \
  X(uchar) X(ushort) X(uint) X(ulong) X(ulonglong) X(int8) X(int16) X(int32) X(int64) X(uint8) \
  X(uint16) X(uint32) X(uint64) X(size)
#define RED_MINMAX(X) \
  X(char) X(schar) X(short) X(int) X(long) X(longlong) X(ptrdiff) RED_BIT(X) X(float) X(double) X(longdouble)
#define RED_ARITH(X) RED_MINMAX(X) X(complexd) X(complexf)
#define SIZES(X) X(8) X(16) X(32) X(64) X(128)

#define BOTH(name) F(shmem_##name) F(shmem_ctx_##name)
#define RMA_FNS(T)                                                                             \
  BOTH(T##_put) BOTH(T##_put_nbi) BOTH(T##_get) BOTH(T##_get_nbi) BOTH(T##_p) BOTH(T##_g)      \
  BOTH(T##_iput) BOTH(T##_iget) BOTH(T##_put_signal) BOTH(T##_put_signal_nbi)                  \
  F(shmem_##T##_broadcast) F(shmem_##T##_collect) F(shmem_##T##_fcollect)                     \
  F(shmem_##T##_alltoall) F(shmem_##T##_alltoalls)
#define SIZE_FNS(B)                                                                              \
  BOTH(put##B) BOTH(put##B##_nbi) BOTH(get##B) BOTH(get##B##_nbi) BOTH(iput##B) BOTH(iget##B) \
  BOTH(put##B##_signal) BOTH(put##B##_signal_nbi)
#define EXT_FNS(T)                                                                            \
  BOTH(T##_atomic_fetch) BOTH(T##_atomic_set) BOTH(T##_atomic_swap) BOTH(T##_atomic_fetch_nbi) \
  BOTH(T##_atomic_swap_nbi)
#define STD_FNS(T)                                                                             \
  BOTH(T##_atomic_compare_swap) BOTH(T##_atomic_fetch_inc) BOTH(T##_atomic_inc)                \
  BOTH(T##_atomic_fetch_add) BOTH(T##_atomic_add) BOTH(T##_atomic_compare_swap_nbi)           \
  BOTH(T##_atomic_fetch_inc_nbi) BOTH(T##_atomic_fetch_add_nbi)
#define BIT_FNS(T)                                                                              \
  BOTH(T##_atomic_fetch_and) BOTH(T##_atomic_and) BOTH(T##_atomic_fetch_and_nbi)                \
  BOTH(T##_atomic_fetch_or) BOTH(T##_atomic_or) BOTH(T##_atomic_fetch_or_nbi)                   \
  BOTH(T##_atomic_fetch_xor) BOTH(T##_atomic_xor) BOTH(T##_atomic_fetch_xor_nbi)
#define P2P_FNS(T)                                                                                 \
  F(shmem_##T##_wait_until) F(shmem_##T##_wait_until_all) F(shmem_##T##_wait_until_any)            \
  F(shmem_##T##_wait_until_some) F(shmem_##T##_wait_until_all_vector)                              \
  F(shmem_##T##_wait_until_any_vector) F(shmem_##T##_wait_until_some_vector) F(shmem_##T##_test) \
  F(shmem_##T##_test_all) F(shmem_##T##_test_any) F(shmem_##T##_test_some)                         \
  F(shmem_##T##_test_all_vector) F(shmem_##T##_test_any_vector) F(shmem_##T##_test_some_vector)
#define RED_BIT_FNS(T) F(shmem_##T##_and_reduce) F(shmem_##T##_or_reduce) F(shmem_##T##_xor_reduce)
#define RED_MINMAX_FNS(T) F(shmem_##T##_max_reduce) F(shmem_##T##_min_reduce)
#define RED_ARITH_FNS(T) F(shmem_##T##_sum_reduce) F(shmem_##T##_prod_reduce)

static any_fn volatile every_function[] = {
    /* 9.1 setup, exit, query */
    F(shmem_init) F(shmem_init_thread) F(shmem_query_thread) F(shmem_finalize)
    F(shmem_global_exit) F(shmem_my_pe) F(shmem_n_pes) F(shmem_pe_accessible)
    F(shmem_addr_accessible) F(shmem_ptr) F(shmem_info_get_version) F(shmem_info_get_name)
    /* 9.3 memory management */
    F(shmem_malloc) F(shmem_free) F(shmem_realloc) F(shmem_align) F(shmem_malloc_with_hints)
    F(shmem_calloc)
    /* 9.4 teams */
    F(shmem_team_my_pe) F(shmem_team_n_pes) F(shmem_team_get_config) F(shmem_team_translate_pe)
    F(shmem_team_split_strided) F(shmem_team_split_2d) F(shmem_team_destroy)
    /* 9.5 contexts */
    F(shmem_ctx_create) F(shmem_team_create_ctx) F(shmem_ctx_destroy) F(shmem_ctx_get_team)
    /* 9.6 RMA, 9.9 typed collectives */
    RMA(RMA_FNS) SIZES(SIZE_FNS)
    BOTH(putmem) BOTH(putmem_nbi) BOTH(getmem) BOTH(getmem_nbi) BOTH(putmem_signal)
    BOTH(putmem_signal_nbi)
    /* 9.7 AMOs */
    AMO_EXT(EXT_FNS) AMO_STD(STD_FNS) AMO_BIT(BIT_FNS)
    /* 9.8 signaling */
    F(shmem_signal_fetch) F(shmem_signal_wait_until)
    /* 9.9 collectives */
    F(shmem_barrier_all) F(shmem_sync_all) F(shmem_team_sync) F(shmem_broadcastmem)
    F(shmem_collectmem) F(shmem_fcollectmem) F(shmem_alltoallmem) F(shmem_alltoallsmem)
    RED_BIT(RED_BIT_FNS) RED_MINMAX(RED_MINMAX_FNS) RED_ARITH(RED_ARITH_FNS)
    /* 9.10 point-to-point synchronization */
    P2P(P2P_FNS)
    /* 9.11 memory ordering */
    F(shmem_fence) F(shmem_quiet) F(shmem_ctx_fence) F(shmem_ctx_quiet)
    /* 9.12 locks */
    F(shmem_set_lock) F(shmem_test_lock) F(shmem_clear_lock)
    /* Annex F: deprecated routines that 1.5 still defines */
    F(start_pes) F(_my_pe) F(_num_pes) F(shmalloc) F(shfree) F(shrealloc) F(shmemalign)
    F(shmem_barrier) F(shmem_broadcast32) F(shmem_broadcast64) F(shmem_collect32)
    F(shmem_collect64) F(shmem_fcollect32) F(shmem_fcollect64) F(shmem_alltoall32)
    F(shmem_alltoall64) F(shmem_alltoalls32) F(shmem_alltoalls64) F(shmem_clear_cache_inv)
    F(shmem_set_cache_inv) F(shmem_clear_cache_line_inv) F(shmem_set_cache_line_inv)
    F(shmem_udcflush) F(shmem_udcflush_line) F(shmem_int_cswap) F(shmem_long_fadd)
    F(shmem_longlong_finc) F(shmem_int_add) F(shmem_long_inc) F(shmem_double_swap)
    F(shmem_float_fetch) F(shmem_int_set) F(shmem_long_wait) F(shmem_short_wait_until)
    F(shmem_int_sum_to_all) F(shmem_double_max_to_all) F(shmem_short_and_to_all)
};

int main(void) {
  const size_t n = sizeof every_function / sizeof every_function[0];
  for (size_t i = 0; i < n; ++i) {
    if (every_function[i] == 0) {
      fprintf(stderr, "entry %zu is null\n", i);
      return 1;
    }
  }
  printf("%zu OpenSHMEM 1.5 functions resolved\n", n);
  return 0;
}
