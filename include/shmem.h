/* shmoe: the OpenSHMEM 1.5 C API.
 *
 * The typed families are declared by applying one declaration macro to a type table from
 * shmoe/type_tables.h; the library defines them from the same tables.
 */
#ifndef SHMEM_H
#define SHMEM_H

#include <stddef.h>
#include <stdint.h>

#include "shmoe/collective_types.h"
#include "shmoe/type_tables.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Constants ------------------------------------------------------------------------- */
#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define SHMEM_MAX_NAME_LEN 256
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define SHMEM_VENDOR_STRING "shmoe"
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

#define SHMEM_CTX_SERIALIZED (1L << 0)
#define SHMEM_CTX_PRIVATE (1L << 1)
#define SHMEM_CTX_NOSTORE (1L << 2)

#define SHMEM_SIGNAL_SET 0
#define SHMEM_SIGNAL_ADD 1

#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_GE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_LE 5
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_GE SHMEM_CMP_GE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_LE SHMEM_CMP_LE

#define SHMEM_MALLOC_ATOMICS_REMOTE (1L << 0)
#define SHMEM_MALLOC_SIGNAL_REMOTE (1L << 1)

#define SHMEM_SYNC_VALUE (-1L)
#define SHMEM_SYNC_SIZE 128
#define SHMEM_BCAST_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_REDUCE_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_BARRIER_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_COLLECT_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_ALLTOALL_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_ALLTOALLS_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 16
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE

/* ---- Handles ----------------------------------------------------------------------------- */
typedef struct shmoe_ctx* shmem_ctx_t;
extern struct shmoe_ctx shmoe_ctx_default;
#define SHMEM_CTX_DEFAULT (&shmoe_ctx_default)
#define SHMEM_CTX_INVALID ((shmem_ctx_t)0)

/* ---- Library setup, exit and query ------------------------------------------------------- */
void shmem_init(void);
int shmem_init_thread(int requested, int* provided);
void shmem_query_thread(int* provided);
void shmem_finalize(void);
void shmem_global_exit(int status);
int shmem_my_pe(void);
int shmem_n_pes(void);
int shmem_pe_accessible(int pe);
int shmem_addr_accessible(const void* addr, int pe);
void* shmem_ptr(const void* dest, int pe);
void shmem_info_get_version(int* major, int* minor);
void shmem_info_get_name(char* name);

/* ---- Memory management ------------------------------------------------------------------- */
void* shmem_malloc(size_t size);
void* shmem_malloc_with_hints(size_t size, long hints);
void* shmem_calloc(size_t count, size_t size);
void* shmem_align(size_t alignment, size_t size);
void* shmem_realloc(void* ptr, size_t size);
void shmem_free(void* ptr);

/* ---- Communication contexts -------------------------------------------------------------- */
int shmem_ctx_create(long options, shmem_ctx_t* ctx);
void shmem_ctx_destroy(shmem_ctx_t ctx);

/* ---- RMA --------------------------------------------------------------------------------- */
/* Every RMA call has a context form shmem_ctx_X(ctx, ...) and a plain form on the default one. */
#define SHMOE_DECL_BOTH(RET, NAME, CTX_NAME, ...) \
  RET NAME(__VA_ARGS__);                          \
  RET CTX_NAME(shmem_ctx_t ctx, __VA_ARGS__);

#define SHMOE_DECL_RMA_TYPED(T, N)                                                                \
  SHMOE_DECL_BOTH(void, shmem_##N##_put, shmem_ctx_##N##_put, T* dest, const T* source,           \
                  size_t nelems, int pe)                                                          \
  SHMOE_DECL_BOTH(void, shmem_##N##_put_nbi, shmem_ctx_##N##_put_nbi, T* dest, const T* source,   \
                  size_t nelems, int pe)                                                          \
  SHMOE_DECL_BOTH(void, shmem_##N##_get, shmem_ctx_##N##_get, T* dest, const T* source,           \
                  size_t nelems, int pe)                                                          \
  SHMOE_DECL_BOTH(void, shmem_##N##_get_nbi, shmem_ctx_##N##_get_nbi, T* dest, const T* source,   \
                  size_t nelems, int pe)                                                          \
  SHMOE_DECL_BOTH(void, shmem_##N##_p, shmem_ctx_##N##_p, T* dest, T value, int pe)               \
  SHMOE_DECL_BOTH(T, shmem_##N##_g, shmem_ctx_##N##_g, const T* source, int pe)                   \
  SHMOE_DECL_BOTH(void, shmem_##N##_iput, shmem_ctx_##N##_iput, T* dest, const T* source,         \
                  ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe)                            \
  SHMOE_DECL_BOTH(void, shmem_##N##_iget, shmem_ctx_##N##_iget, T* dest, const T* source,         \
                  ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe)                            \
  SHMOE_DECL_BOTH(void, shmem_##N##_put_signal, shmem_ctx_##N##_put_signal, T* dest,              \
                  const T* source, size_t nelems, uint64_t* sig_addr, uint64_t signal, int sig_op, \
                  int pe)                                                                         \
  SHMOE_DECL_BOTH(void, shmem_##N##_put_signal_nbi, shmem_ctx_##N##_put_signal_nbi, T* dest,      \
                  const T* source, size_t nelems, uint64_t* sig_addr, uint64_t signal, int sig_op, \
                  int pe)
SHMOE_RMA_TYPES(SHMOE_DECL_RMA_TYPED)

#define SHMOE_DECL_RMA_SIZED(BITS, T)                                                             \
  SHMOE_DECL_BOTH(void, shmem_put##BITS, shmem_ctx_put##BITS, void* dest, const void* source,     \
                  size_t nelems, int pe)                                                          \
  SHMOE_DECL_BOTH(void, shmem_put##BITS##_nbi, shmem_ctx_put##BITS##_nbi, void* dest,             \
                  const void* source, size_t nelems, int pe)                                      \
  SHMOE_DECL_BOTH(void, shmem_get##BITS, shmem_ctx_get##BITS, void* dest, const void* source,     \
                  size_t nelems, int pe)                                                          \
  SHMOE_DECL_BOTH(void, shmem_get##BITS##_nbi, shmem_ctx_get##BITS##_nbi, void* dest,             \
                  const void* source, size_t nelems, int pe)                                      \
  SHMOE_DECL_BOTH(void, shmem_iput##BITS, shmem_ctx_iput##BITS, void* dest, const void* source,   \
                  ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe)                            \
  SHMOE_DECL_BOTH(void, shmem_iget##BITS, shmem_ctx_iget##BITS, void* dest, const void* source,   \
                  ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe)                            \
  SHMOE_DECL_BOTH(void, shmem_put##BITS##_signal, shmem_ctx_put##BITS##_signal, void* dest,       \
                  const void* source, size_t nelems, uint64_t* sig_addr, uint64_t signal,         \
                  int sig_op, int pe)                                                             \
  SHMOE_DECL_BOTH(void, shmem_put##BITS##_signal_nbi, shmem_ctx_put##BITS##_signal_nbi,           \
                  void* dest, const void* source, size_t nelems, uint64_t* sig_addr,              \
                  uint64_t signal, int sig_op, int pe)
SHMOE_RMA_SIZES(SHMOE_DECL_RMA_SIZED)

SHMOE_DECL_BOTH(void, shmem_putmem, shmem_ctx_putmem, void* dest, const void* source,
                size_t nelems, int pe)
SHMOE_DECL_BOTH(void, shmem_putmem_nbi, shmem_ctx_putmem_nbi, void* dest, const void* source,
                size_t nelems, int pe)
SHMOE_DECL_BOTH(void, shmem_getmem, shmem_ctx_getmem, void* dest, const void* source,
                size_t nelems, int pe)
SHMOE_DECL_BOTH(void, shmem_getmem_nbi, shmem_ctx_getmem_nbi, void* dest, const void* source,
                size_t nelems, int pe)
SHMOE_DECL_BOTH(void, shmem_putmem_signal, shmem_ctx_putmem_signal, void* dest,
                const void* source, size_t nelems, uint64_t* sig_addr, uint64_t signal, int sig_op,
                int pe)
SHMOE_DECL_BOTH(void, shmem_putmem_signal_nbi, shmem_ctx_putmem_signal_nbi, void* dest,
                const void* source, size_t nelems, uint64_t* sig_addr, uint64_t signal, int sig_op,
                int pe)

uint64_t shmem_signal_fetch(const uint64_t* sig_addr);
uint64_t shmem_signal_wait_until(uint64_t* sig_addr, int cmp, uint64_t cmp_value);

/* ---- Atomic memory operations ------------------------------------------------------------ */
#define SHMOE_DECL_AMO_EXTENDED(T, N)                                                             \
  SHMOE_DECL_BOTH(T, shmem_##N##_atomic_fetch, shmem_ctx_##N##_atomic_fetch, const T* source,     \
                  int pe)                                                                         \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_set, shmem_ctx_##N##_atomic_set, T* dest, T value,     \
                  int pe)                                                                         \
  SHMOE_DECL_BOTH(T, shmem_##N##_atomic_swap, shmem_ctx_##N##_atomic_swap, T* dest, T value,      \
                  int pe)                                                                         \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_fetch_nbi, shmem_ctx_##N##_atomic_fetch_nbi, T* fetch, \
                  const T* source, int pe)                                                        \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_swap_nbi, shmem_ctx_##N##_atomic_swap_nbi, T* fetch,   \
                  T* dest, T value, int pe)
SHMOE_AMO_EXTENDED_TYPES(SHMOE_DECL_AMO_EXTENDED)

#define SHMOE_DECL_AMO_STANDARD(T, N)                                                             \
  SHMOE_DECL_BOTH(T, shmem_##N##_atomic_compare_swap, shmem_ctx_##N##_atomic_compare_swap,        \
                  T* dest, T cond, T value, int pe)                                               \
  SHMOE_DECL_BOTH(T, shmem_##N##_atomic_fetch_inc, shmem_ctx_##N##_atomic_fetch_inc, T* dest,     \
                  int pe)                                                                         \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_inc, shmem_ctx_##N##_atomic_inc, T* dest, int pe)      \
  SHMOE_DECL_BOTH(T, shmem_##N##_atomic_fetch_add, shmem_ctx_##N##_atomic_fetch_add, T* dest,     \
                  T value, int pe)                                                                \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_add, shmem_ctx_##N##_atomic_add, T* dest, T value,     \
                  int pe)                                                                         \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_compare_swap_nbi,                                      \
                  shmem_ctx_##N##_atomic_compare_swap_nbi, T* fetch, T* dest, T cond, T value,    \
                  int pe)                                                                         \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_fetch_inc_nbi, shmem_ctx_##N##_atomic_fetch_inc_nbi,   \
                  T* fetch, T* dest, int pe)                                                      \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_fetch_add_nbi, shmem_ctx_##N##_atomic_fetch_add_nbi,   \
                  T* fetch, T* dest, T value, int pe)
SHMOE_AMO_STANDARD_TYPES(SHMOE_DECL_AMO_STANDARD)

#define SHMOE_DECL_AMO_BITWISE_OP(T, N, OP)                                                       \
  SHMOE_DECL_BOTH(T, shmem_##N##_atomic_fetch_##OP, shmem_ctx_##N##_atomic_fetch_##OP, T* dest,   \
                  T value, int pe)                                                                \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_##OP, shmem_ctx_##N##_atomic_##OP, T* dest, T value,   \
                  int pe)                                                                         \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_fetch_##OP##_nbi,                                      \
                  shmem_ctx_##N##_atomic_fetch_##OP##_nbi, T* fetch, T* dest, T value, int pe)
#define SHMOE_DECL_AMO_BITWISE(T, N) \
  SHMOE_DECL_AMO_BITWISE_OP(T, N, and) \
  SHMOE_DECL_AMO_BITWISE_OP(T, N, or)  \
  SHMOE_DECL_AMO_BITWISE_OP(T, N, xor)
SHMOE_AMO_BITWISE_TYPES(SHMOE_DECL_AMO_BITWISE)

/* ---- Memory ordering --------------------------------------------------------------------- */
void shmem_fence(void);
void shmem_quiet(void);
void shmem_ctx_fence(shmem_ctx_t ctx);
void shmem_ctx_quiet(shmem_ctx_t ctx);

/* ---- Point-to-point synchronization ------------------------------------------------------ */
#define SHMOE_DECL_P2P_SYNC(T, N)                                                                 \
  void shmem_##N##_wait_until(T* ivar, int cmp, T cmp_value);                                     \
  void shmem_##N##_wait_until_all(T* ivars, size_t nelems, const int* status, int cmp,            \
                                  T cmp_value);                                                   \
  size_t shmem_##N##_wait_until_any(T* ivars, size_t nelems, const int* status, int cmp,          \
                                    T cmp_value);                                                 \
  size_t shmem_##N##_wait_until_some(T* ivars, size_t nelems, size_t* indices, const int* status, \
                                     int cmp, T cmp_value);                                       \
  void shmem_##N##_wait_until_all_vector(T* ivars, size_t nelems, const int* status, int cmp,     \
                                         T* cmp_values);                                          \
  size_t shmem_##N##_wait_until_any_vector(T* ivars, size_t nelems, const int* status, int cmp,   \
                                           T* cmp_values);                                        \
  size_t shmem_##N##_wait_until_some_vector(T* ivars, size_t nelems, size_t* indices,             \
                                            const int* status, int cmp, T* cmp_values);           \
  int shmem_##N##_test(T* ivar, int cmp, T cmp_value);                                            \
  int shmem_##N##_test_all(T* ivars, size_t nelems, const int* status, int cmp, T cmp_value);     \
  size_t shmem_##N##_test_any(T* ivars, size_t nelems, const int* status, int cmp, T cmp_value);  \
  size_t shmem_##N##_test_some(T* ivars, size_t nelems, size_t* indices, const int* status,       \
                               int cmp, T cmp_value);                                             \
  int shmem_##N##_test_all_vector(T* ivars, size_t nelems, const int* status, int cmp,            \
                                  T* cmp_values);                                                 \
  size_t shmem_##N##_test_any_vector(T* ivars, size_t nelems, const int* status, int cmp,         \
                                     T* cmp_values);                                              \
  size_t shmem_##N##_test_some_vector(T* ivars, size_t nelems, size_t* indices,                   \
                                      const int* status, int cmp, T* cmp_values);
SHMOE_P2P_SYNC_TYPES(SHMOE_DECL_P2P_SYNC)

/* ---- Collectives (whole job) ------------------------------------------------------------- */
void shmem_barrier_all(void);
void shmem_sync_all(void);


/* ---- Teams (OpenSHMEM 1.5 section 9.4) --------------------------------------------------- */
typedef struct shmoe_team* shmem_team_t;
extern struct shmoe_team shmoe_team_world, shmoe_team_shared;
#define SHMEM_TEAM_WORLD (&shmoe_team_world)
#define SHMEM_TEAM_SHARED (&shmoe_team_shared)
#define SHMEM_TEAM_INVALID ((shmem_team_t)0)

typedef struct {
  int num_contexts;
} shmem_team_config_t;
#define SHMEM_TEAM_NUM_CONTEXTS (1L << 0)

int shmem_team_my_pe(shmem_team_t team);
int shmem_team_n_pes(shmem_team_t team);
int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t* config);
int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team);
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t* config, long config_mask,
                             shmem_team_t* new_team);
int shmem_team_split_2d(shmem_team_t parent_team, int xrange,
                        const shmem_team_config_t* xaxis_config, long xaxis_mask,
                        shmem_team_t* xaxis_team, const shmem_team_config_t* yaxis_config,
                        long yaxis_mask, shmem_team_t* yaxis_team);
void shmem_team_destroy(shmem_team_t team);
int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t* ctx);
int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t* team);
int shmem_team_sync(shmem_team_t team);

/* ---- Collectives on teams (section 9.9) -------------------------------------------------- */
/* shmem_sync(team) is the type-generic name of shmem_team_sync (see the end of this file); the
 * C symbol shmem_sync is the deprecated active-set form below. */
#define SHMOE_DECL_TEAM_COLL(T, N)                                                                 \
  int shmem_##N##_broadcast(shmem_team_t team, T* dest, const T* source, size_t nelems,            \
                            int PE_root);                                                          \
  int shmem_##N##_collect(shmem_team_t team, T* dest, const T* source, size_t nelems);             \
  int shmem_##N##_fcollect(shmem_team_t team, T* dest, const T* source, size_t nelems);            \
  int shmem_##N##_alltoall(shmem_team_t team, T* dest, const T* source, size_t nelems);            \
  int shmem_##N##_alltoalls(shmem_team_t team, T* dest, const T* source, ptrdiff_t dst,            \
                            ptrdiff_t sst, size_t nelems);
SHMOE_RMA_TYPES(SHMOE_DECL_TEAM_COLL)
int shmem_broadcastmem(shmem_team_t team, void* dest, const void* source, size_t nelems,
                       int PE_root);
int shmem_collectmem(shmem_team_t team, void* dest, const void* source, size_t nelems);
int shmem_fcollectmem(shmem_team_t team, void* dest, const void* source, size_t nelems);
int shmem_alltoallmem(shmem_team_t team, void* dest, const void* source, size_t nelems);
int shmem_alltoallsmem(shmem_team_t team, void* dest, const void* source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems);

#define SHMOE_DECL_REDUCE(T, N, OP) \
  int shmem_##N##_##OP##_reduce(shmem_team_t team, T* dest, const T* source, size_t nreduce);
#define SHMOE_DECL_REDUCE_BITWISE(T, N) \
  SHMOE_DECL_REDUCE(T, N, and) SHMOE_DECL_REDUCE(T, N, or) SHMOE_DECL_REDUCE(T, N, xor)
#define SHMOE_DECL_REDUCE_MINMAX(T, N) SHMOE_DECL_REDUCE(T, N, max) SHMOE_DECL_REDUCE(T, N, min)
#define SHMOE_DECL_REDUCE_ARITH(T, N) SHMOE_DECL_REDUCE(T, N, sum) SHMOE_DECL_REDUCE(T, N, prod)
SHMOE_REDUCE_BITWISE_TYPES(SHMOE_DECL_REDUCE_BITWISE)
SHMOE_REDUCE_MINMAX_TYPES(SHMOE_DECL_REDUCE_MINMAX)
SHMOE_REDUCE_ARITH_TYPES(SHMOE_DECL_REDUCE_ARITH)

/* ---- Deprecated active-set collectives (still defined by 1.5, Annex F) ------------------- */
/* The active set is {PE_start + i * 2^logPE_stride : 0 <= i < PE_size}. shmoe keeps its own
 * symmetric scratch per distinct active set (at most SHMOE_MAX_ACTIVE_SETS per job), so pSync
 * and pWrk are accepted and never read or written. */
#define SHMOE_MAX_ACTIVE_SETS 16
void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long* pSync);
void shmem_sync(int PE_start, int logPE_stride, int PE_size, long* pSync);
#define SHMOE_DECL_ACTIVE_SET_SIZED(BITS, T)                                                      \
  void shmem_broadcast##BITS(void* dest, const void* source, size_t nelems, int PE_root,          \
                             int PE_start, int logPE_stride, int PE_size, long* pSync);           \
  void shmem_collect##BITS(void* dest, const void* source, size_t nelems, int PE_start,           \
                           int logPE_stride, int PE_size, long* pSync);                           \
  void shmem_fcollect##BITS(void* dest, const void* source, size_t nelems, int PE_start,          \
                            int logPE_stride, int PE_size, long* pSync);                          \
  void shmem_alltoall##BITS(void* dest, const void* source, size_t nelems, int PE_start,          \
                            int logPE_stride, int PE_size, long* pSync);                          \
  void shmem_alltoalls##BITS(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,        \
                             size_t nelems, int PE_start, int logPE_stride, int PE_size,          \
                             long* pSync);
SHMOE_DECL_ACTIVE_SET_SIZED(32, uint32_t)
SHMOE_DECL_ACTIVE_SET_SIZED(64, uint64_t)

#define SHMOE_DECL_TO_ALL(T, N, OP)                                                               \
  void shmem_##N##_##OP##_to_all(T* dest, const T* source, int nreduce, int PE_start,             \
                                 int logPE_stride, int PE_size, T* pWrk, long* pSync);
#define SHMOE_DECL_TO_ALL_BITWISE(T, N) \
  SHMOE_DECL_TO_ALL(T, N, and) SHMOE_DECL_TO_ALL(T, N, or) SHMOE_DECL_TO_ALL(T, N, xor)
#define SHMOE_DECL_TO_ALL_MINMAX(T, N) SHMOE_DECL_TO_ALL(T, N, max) SHMOE_DECL_TO_ALL(T, N, min)
#define SHMOE_DECL_TO_ALL_ARITH(T, N) SHMOE_DECL_TO_ALL(T, N, sum) SHMOE_DECL_TO_ALL(T, N, prod)
SHMOE_TO_ALL_BITWISE_TYPES(SHMOE_DECL_TO_ALL_BITWISE)
SHMOE_TO_ALL_MINMAX_TYPES(SHMOE_DECL_TO_ALL_MINMAX)
SHMOE_TO_ALL_ARITH_TYPES(SHMOE_DECL_TO_ALL_ARITH)

/* ---- Distributed locking (section 9.11) -------------------------------------------------- */
/* The lock is a symmetric long set to 0 on every PE before first use. */
void shmem_set_lock(long* lock);
void shmem_clear_lock(long* lock);
int shmem_test_lock(long* lock);

/* ---- Deprecated routines older programs use (Annex F) ------------------------------------ */
void start_pes(int npes);
int _my_pe(void);
int _num_pes(void);
void* shmalloc(size_t size);
void shfree(void* ptr);
void* shrealloc(void* ptr, size_t size);
void* shmemalign(size_t alignment, size_t size);

#define SHMOE_DECL_AMO_OLD(T, N)                                 \
  T shmem_##N##_cswap(T* dest, T cond, T value, int pe);         \
  T shmem_##N##_fadd(T* dest, T value, int pe);                  \
  T shmem_##N##_finc(T* dest, int pe);                           \
  void shmem_##N##_add(T* dest, T value, int pe);                \
  void shmem_##N##_inc(T* dest, int pe);
SHMOE_DEPRECATED_AMO_TYPES(SHMOE_DECL_AMO_OLD)
#define SHMOE_DECL_AMO_OLD_EXTENDED(T, N)   \
  T shmem_##N##_swap(T* dest, T value, int pe); \
  T shmem_##N##_fetch(const T* source, int pe); \
  void shmem_##N##_set(T* dest, T value, int pe);
SHMOE_DEPRECATED_AMO_EXTENDED_TYPES(SHMOE_DECL_AMO_OLD_EXTENDED)
long shmem_swap(long* dest, long value, int pe);

#define SHMOE_DECL_WAIT_OLD(T, N) void shmem_##N##_wait(T* ivar, T cmp_value);
SHMOE_DEPRECATED_WAIT_TYPES(SHMOE_DECL_WAIT_OLD)
void shmem_wait(long* ivar, long cmp_value);
void shmem_short_wait_until(short* ivar, int cmp, short cmp_value);

/* Cache management: shared memory is coherent, so these do nothing. */
void shmem_clear_cache_inv(void);
void shmem_set_cache_inv(void);
void shmem_clear_cache_line_inv(void* dest);
void shmem_set_cache_line_inv(void* dest);
void shmem_udcflush(void);
void shmem_udcflush_line(void* dest);

#ifdef __cplusplus
}
#endif

#include "shmoe/generic.h"

#endif /* SHMEM_H */
