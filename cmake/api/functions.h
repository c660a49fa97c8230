/* Every function of the OpenSHMEM C API, declared with the name prefix SHMOE_PREFIX: empty for
 * shmem.h (shmem_long_put), `p` for pshmem.h, the profiling interface (pshmem_long_put). The
 * typed families are declared by applying one declaration macro to a type table of
 * shmoe/type_tables.h or shmoe/collective_types.h; the library defines them from the same tables.
 *
 * Not a header of the install: the build preprocesses this file (cmake/ShmoeApiHeaders.cmake)
 * and writes the flat prototypes it yields into the generated shmem.h and pshmem.h.
 * SHMOE_C_ONLY, a marker the generator reads, puts a declaration out of C++'s sight.
 */

/* SHMOE_F(shmem_x) is shmem_x in shmem.h and pshmem_x in pshmem.h. */
#define SHMOE_F(name) SHMOE_F_(SHMOE_PREFIX, name)
#define SHMOE_F_(prefix, name) SHMOE_F__(prefix, name)
#define SHMOE_F__(prefix, name) prefix##name

/* ---- Library setup, exit and query (section 9.1, 9.2) ------------------------------------ */
void SHMOE_F(shmem_init)(void);
int SHMOE_F(shmem_init_thread)(int requested, int* provided);
void SHMOE_F(shmem_query_thread)(int* provided);
void SHMOE_F(shmem_query_initialized)(int* initialized); /* 1.6, 9.1.5: at any time */
void SHMOE_F(shmem_finalize)(void);
SHMOE_NORETURN void SHMOE_F(shmem_global_exit)(int status);
int SHMOE_F(shmem_my_pe)(void);
int SHMOE_F(shmem_n_pes)(void);
int SHMOE_F(shmem_pe_accessible)(int pe);
int SHMOE_F(shmem_addr_accessible)(const void* addr, int pe);
void* SHMOE_F(shmem_ptr)(const void* dest, int pe);
void* SHMOE_F(shmem_team_ptr)(shmem_team_t team, const void* dest, int pe); /* 1.6, 9.1.10 */
void SHMOE_F(shmem_info_get_version)(int* major, int* minor);
void SHMOE_F(shmem_info_get_name)(char* name);

/* ---- Memory management (9.3) ------------------------------------------------------------- */
void* SHMOE_F(shmem_malloc)(size_t size);
void* SHMOE_F(shmem_malloc_with_hints)(size_t size, long hints);
void* SHMOE_F(shmem_calloc)(size_t count, size_t size);
void* SHMOE_F(shmem_align)(size_t alignment, size_t size);
void* SHMOE_F(shmem_realloc)(void* ptr, size_t size);
void SHMOE_F(shmem_free)(void* ptr);

/* ---- Teams (9.4) ------------------------------------------------------------------------- */
int SHMOE_F(shmem_team_my_pe)(shmem_team_t team);
int SHMOE_F(shmem_team_n_pes)(shmem_team_t team);
int SHMOE_F(shmem_team_get_config)(shmem_team_t team, long config_mask,
                                   shmem_team_config_t* config);
int SHMOE_F(shmem_team_translate_pe)(shmem_team_t src_team, int src_pe, shmem_team_t dest_team);
int SHMOE_F(shmem_team_split_strided)(shmem_team_t parent_team, int start, int stride, int size,
                                      const shmem_team_config_t* config, long config_mask,
                                      shmem_team_t* new_team);
int SHMOE_F(shmem_team_split_2d)(shmem_team_t parent_team, int xrange,
                                 const shmem_team_config_t* xaxis_config, long xaxis_mask,
                                 shmem_team_t* xaxis_team, const shmem_team_config_t* yaxis_config,
                                 long yaxis_mask, shmem_team_t* yaxis_team);
void SHMOE_F(shmem_team_destroy)(shmem_team_t team);

/* ---- Communication contexts (9.5) -------------------------------------------------------- */
int SHMOE_F(shmem_ctx_create)(long options, shmem_ctx_t* ctx);
int SHMOE_F(shmem_team_create_ctx)(shmem_team_t team, long options, shmem_ctx_t* ctx);
void SHMOE_F(shmem_ctx_destroy)(shmem_ctx_t ctx);
int SHMOE_F(shmem_ctx_get_team)(shmem_ctx_t ctx, shmem_team_t* team);
void SHMOE_F(shmem_ctx_session_start)(shmem_ctx_t ctx, long options,
                                      const shmem_ctx_session_config_t* config, long config_mask);
void SHMOE_F(shmem_ctx_session_stop)(shmem_ctx_t ctx);

/* Every RMA and AMO call has a context form shmem_ctx_X(ctx, ...) and a plain form on the
 * default context. */
#define SHMOE_DECL_BOTH(RET, NAME, CTX_NAME, ...) \
  RET SHMOE_F(NAME)(__VA_ARGS__);                 \
  RET SHMOE_F(CTX_NAME)(shmem_ctx_t ctx, __VA_ARGS__);

/* ---- RMA (9.6; ibput and ibget are 1.6's 9.6.1.4, 9.6.1.8) and signaling (9.8) --------------- */
#define SHMOE_DECL_RMA_TYPED(T, N)                                                                 \
  SHMOE_DECL_BOTH(void, shmem_##N##_put, shmem_ctx_##N##_put, T* dest, const T* source,            \
                  size_t nelems, int pe)                                                           \
  SHMOE_DECL_BOTH(void, shmem_##N##_put_nbi, shmem_ctx_##N##_put_nbi, T* dest, const T* source,    \
                  size_t nelems, int pe)                                                           \
  SHMOE_DECL_BOTH(void, shmem_##N##_get, shmem_ctx_##N##_get, T* dest, const T* source,            \
                  size_t nelems, int pe)                                                           \
  SHMOE_DECL_BOTH(void, shmem_##N##_get_nbi, shmem_ctx_##N##_get_nbi, T* dest, const T* source,    \
                  size_t nelems, int pe)                                                           \
  SHMOE_DECL_BOTH(void, shmem_##N##_p, shmem_ctx_##N##_p, T* dest, T value, int pe)                \
  SHMOE_DECL_BOTH(T, shmem_##N##_g, shmem_ctx_##N##_g, const T* source, int pe)                    \
  SHMOE_DECL_BOTH(void, shmem_##N##_iput, shmem_ctx_##N##_iput, T* dest, const T* source,          \
                  ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe)                             \
  SHMOE_DECL_BOTH(void, shmem_##N##_iget, shmem_ctx_##N##_iget, T* dest, const T* source,          \
                  ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe)                             \
  SHMOE_DECL_BOTH(void, shmem_##N##_ibput, shmem_ctx_##N##_ibput, T* dest, const T* source,        \
                  ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks, int pe)              \
  SHMOE_DECL_BOTH(void, shmem_##N##_ibget, shmem_ctx_##N##_ibget, T* dest, const T* source,        \
                  ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks, int pe)              \
  SHMOE_DECL_BOTH(void, shmem_##N##_put_signal, shmem_ctx_##N##_put_signal, T* dest,               \
                  const T* source, size_t nelems, uint64_t* sig_addr, uint64_t signal, int sig_op, \
                  int pe)                                                                          \
  SHMOE_DECL_BOTH(void, shmem_##N##_put_signal_nbi, shmem_ctx_##N##_put_signal_nbi, T* dest,       \
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
  SHMOE_DECL_BOTH(void, shmem_ibput##BITS, shmem_ctx_ibput##BITS, void* dest, const void* source, \
                  ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks, int pe)             \
  SHMOE_DECL_BOTH(void, shmem_ibget##BITS, shmem_ctx_ibget##BITS, void* dest, const void* source, \
                  ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks, int pe)             \
  SHMOE_DECL_BOTH(void, shmem_put##BITS##_signal, shmem_ctx_put##BITS##_signal, void* dest,       \
                  const void* source, size_t nelems, uint64_t* sig_addr, uint64_t signal,         \
                  int sig_op, int pe)                                                             \
  SHMOE_DECL_BOTH(void, shmem_put##BITS##_signal_nbi, shmem_ctx_put##BITS##_signal_nbi,           \
                  void* dest, const void* source, size_t nelems, uint64_t* sig_addr,              \
                  uint64_t signal, int sig_op, int pe)
SHMOE_RMA_SIZES(SHMOE_DECL_RMA_SIZED)

SHMOE_DECL_BOTH(void, shmem_putmem, shmem_ctx_putmem, void* dest, const void* source, size_t nelems,
                int pe)
SHMOE_DECL_BOTH(void, shmem_putmem_nbi, shmem_ctx_putmem_nbi, void* dest, const void* source,
                size_t nelems, int pe)
SHMOE_DECL_BOTH(void, shmem_getmem, shmem_ctx_getmem, void* dest, const void* source, size_t nelems,
                int pe)
SHMOE_DECL_BOTH(void, shmem_getmem_nbi, shmem_ctx_getmem_nbi, void* dest, const void* source,
                size_t nelems, int pe)
SHMOE_DECL_BOTH(void, shmem_putmem_signal, shmem_ctx_putmem_signal, void* dest, const void* source,
                size_t nelems, uint64_t* sig_addr, uint64_t signal, int sig_op, int pe)
SHMOE_DECL_BOTH(void, shmem_putmem_signal_nbi, shmem_ctx_putmem_signal_nbi, void* dest,
                const void* source, size_t nelems, uint64_t* sig_addr, uint64_t signal, int sig_op,
                int pe)

uint64_t SHMOE_F(shmem_signal_fetch)(const uint64_t* sig_addr);
/* OpenSHMEM 1.6 (9.8.5, 9.8.7): the signal update of put-with-signal alone. */
SHMOE_DECL_BOTH(void, shmem_signal_add, shmem_ctx_signal_add, uint64_t* sig_addr, uint64_t signal,
                int pe)
SHMOE_DECL_BOTH(void, shmem_signal_set, shmem_ctx_signal_set, uint64_t* sig_addr, uint64_t signal,
                int pe)
uint64_t SHMOE_F(shmem_signal_wait_until)(uint64_t* sig_addr, int cmp, uint64_t cmp_value);

/* ---- Atomic memory operations (9.7) ------------------------------------------------------ */
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

#define SHMOE_DECL_AMO_STANDARD(T, N)                                                           \
  SHMOE_DECL_BOTH(T, shmem_##N##_atomic_compare_swap, shmem_ctx_##N##_atomic_compare_swap,      \
                  T* dest, T cond, T value, int pe)                                             \
  SHMOE_DECL_BOTH(T, shmem_##N##_atomic_fetch_inc, shmem_ctx_##N##_atomic_fetch_inc, T* dest,   \
                  int pe)                                                                       \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_inc, shmem_ctx_##N##_atomic_inc, T* dest, int pe)    \
  SHMOE_DECL_BOTH(T, shmem_##N##_atomic_fetch_add, shmem_ctx_##N##_atomic_fetch_add, T* dest,   \
                  T value, int pe)                                                              \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_add, shmem_ctx_##N##_atomic_add, T* dest, T value,   \
                  int pe)                                                                       \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_compare_swap_nbi,                                    \
                  shmem_ctx_##N##_atomic_compare_swap_nbi, T* fetch, T* dest, T cond, T value,  \
                  int pe)                                                                       \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_fetch_inc_nbi, shmem_ctx_##N##_atomic_fetch_inc_nbi, \
                  T* fetch, T* dest, int pe)                                                    \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_fetch_add_nbi, shmem_ctx_##N##_atomic_fetch_add_nbi, \
                  T* fetch, T* dest, T value, int pe)
SHMOE_AMO_STANDARD_TYPES(SHMOE_DECL_AMO_STANDARD)

#define SHMOE_DECL_AMO_BITWISE_OP(T, N, OP)                                                     \
  SHMOE_DECL_BOTH(T, shmem_##N##_atomic_fetch_##OP, shmem_ctx_##N##_atomic_fetch_##OP, T* dest, \
                  T value, int pe)                                                              \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_##OP, shmem_ctx_##N##_atomic_##OP, T* dest, T value, \
                  int pe)                                                                       \
  SHMOE_DECL_BOTH(void, shmem_##N##_atomic_fetch_##OP##_nbi,                                    \
                  shmem_ctx_##N##_atomic_fetch_##OP##_nbi, T* fetch, T* dest, T value, int pe)
#define SHMOE_DECL_AMO_BITWISE(T, N)   \
  SHMOE_DECL_AMO_BITWISE_OP(T, N, and) \
  SHMOE_DECL_AMO_BITWISE_OP(T, N, or)  \
  SHMOE_DECL_AMO_BITWISE_OP(T, N, xor)
SHMOE_AMO_BITWISE_TYPES(SHMOE_DECL_AMO_BITWISE)

/* ---- Collectives (9.9) ------------------------------------------------------------------- */
void SHMOE_F(shmem_barrier_all)(void);
void SHMOE_F(shmem_sync_all)(void);
/* shmem_sync(team) is the type-generic name of shmem_team_sync (shmoe/generic.h); the C symbol
 * shmem_sync is the deprecated active-set form below. */
int SHMOE_F(shmem_team_sync)(shmem_team_t team);

#define SHMOE_DECL_TEAM_COLL(T, N)                                                                \
  int SHMOE_F(shmem_##N##_broadcast)(shmem_team_t team, T * dest, const T* source, size_t nelems, \
                                     int PE_root);                                                \
  int SHMOE_F(shmem_##N##_collect)(shmem_team_t team, T * dest, const T* source, size_t nelems);  \
  int SHMOE_F(shmem_##N##_fcollect)(shmem_team_t team, T * dest, const T* source, size_t nelems); \
  int SHMOE_F(shmem_##N##_alltoall)(shmem_team_t team, T * dest, const T* source, size_t nelems); \
  int SHMOE_F(shmem_##N##_alltoalls)(shmem_team_t team, T * dest, const T* source, ptrdiff_t dst, \
                                     ptrdiff_t sst, size_t nelems);
SHMOE_RMA_TYPES(SHMOE_DECL_TEAM_COLL)
int SHMOE_F(shmem_broadcastmem)(shmem_team_t team, void* dest, const void* source, size_t nelems,
                                int PE_root);
int SHMOE_F(shmem_collectmem)(shmem_team_t team, void* dest, const void* source, size_t nelems);
int SHMOE_F(shmem_fcollectmem)(shmem_team_t team, void* dest, const void* source, size_t nelems);
int SHMOE_F(shmem_alltoallmem)(shmem_team_t team, void* dest, const void* source, size_t nelems);
int SHMOE_F(shmem_alltoallsmem)(shmem_team_t team, void* dest, const void* source, ptrdiff_t dst,
                                ptrdiff_t sst, size_t nelems);

#define SHMOE_DECL_REDUCE(T, N, OP)                                                    \
  int SHMOE_F(shmem_##N##_##OP##_reduce)(shmem_team_t team, T * dest, const T* source, \
                                         size_t nreduce);
#define SHMOE_DECL_REDUCE_BITWISE(T, N) \
  SHMOE_DECL_REDUCE(T, N, and) SHMOE_DECL_REDUCE(T, N, or) SHMOE_DECL_REDUCE(T, N, xor)
#define SHMOE_DECL_REDUCE_MINMAX(T, N) SHMOE_DECL_REDUCE(T, N, max) SHMOE_DECL_REDUCE(T, N, min)
#define SHMOE_DECL_REDUCE_ARITH(T, N) SHMOE_DECL_REDUCE(T, N, sum) SHMOE_DECL_REDUCE(T, N, prod)
SHMOE_REDUCE_BITWISE_TYPES(SHMOE_DECL_REDUCE_BITWISE)
SHMOE_REDUCE_MINMAX_TYPES(SHMOE_DECL_REDUCE_MINMAX)
SHMOE_REDUCE_ARITH_TYPES(SHMOE_DECL_REDUCE_ARITH)
/* OpenSHMEM 1.6 (9.10.10): prefix sums over the types of the SUM reduction. */
#define SHMOE_DECL_SCANS(T, N)                                                      \
  int SHMOE_F(shmem_##N##_sum_inscan)(shmem_team_t team, T * dest, const T* source, \
                                      size_t nelems);                               \
  int SHMOE_F(shmem_##N##_sum_exscan)(shmem_team_t team, T * dest, const T* source, size_t nelems);
SHMOE_REDUCE_ARITH_TYPES(SHMOE_DECL_SCANS)

/* ---- Point-to-point synchronization (9.10) ----------------------------------------------- */
#define SHMOE_DECL_P2P_SYNC(T, N)                                                                  \
  void SHMOE_F(shmem_##N##_wait_until)(T * ivar, int cmp, T cmp_value);                            \
  void SHMOE_F(shmem_##N##_wait_until_all)(T * ivars, size_t nelems, const int* status, int cmp,   \
                                           T cmp_value);                                           \
  size_t SHMOE_F(shmem_##N##_wait_until_any)(T * ivars, size_t nelems, const int* status, int cmp, \
                                             T cmp_value);                                         \
  size_t SHMOE_F(shmem_##N##_wait_until_some)(T * ivars, size_t nelems, size_t * indices,          \
                                              const int* status, int cmp, T cmp_value);            \
  void SHMOE_F(shmem_##N##_wait_until_all_vector)(T * ivars, size_t nelems, const int* status,     \
                                                  int cmp, const T* cmp_values);                   \
  size_t SHMOE_F(shmem_##N##_wait_until_any_vector)(T * ivars, size_t nelems, const int* status,   \
                                                    int cmp, const T* cmp_values);                 \
  size_t SHMOE_F(shmem_##N##_wait_until_some_vector)(T * ivars, size_t nelems, size_t * indices,   \
                                                     const int* status, int cmp,                   \
                                                     const T* cmp_values);                         \
  int SHMOE_F(shmem_##N##_test)(T * ivar, int cmp, T cmp_value);                                   \
  int SHMOE_F(shmem_##N##_test_all)(T * ivars, size_t nelems, const int* status, int cmp,          \
                                    T cmp_value);                                                  \
  size_t SHMOE_F(shmem_##N##_test_any)(T * ivars, size_t nelems, const int* status, int cmp,       \
                                       T cmp_value);                                               \
  size_t SHMOE_F(shmem_##N##_test_some)(T * ivars, size_t nelems, size_t * indices,                \
                                        const int* status, int cmp, T cmp_value);                  \
  int SHMOE_F(shmem_##N##_test_all_vector)(T * ivars, size_t nelems, const int* status, int cmp,   \
                                           const T* cmp_values);                                   \
  size_t SHMOE_F(shmem_##N##_test_any_vector)(T * ivars, size_t nelems, const int* status,         \
                                              int cmp, const T* cmp_values);                       \
  size_t SHMOE_F(shmem_##N##_test_some_vector)(T * ivars, size_t nelems, size_t * indices,         \
                                               const int* status, int cmp, const T* cmp_values);
SHMOE_P2P_SYNC_TYPES(SHMOE_DECL_P2P_SYNC)

/* ---- Memory ordering (9.11) -------------------------------------------------------------- */
void SHMOE_F(shmem_fence)(void);
void SHMOE_F(shmem_quiet)(void);
void SHMOE_F(shmem_ctx_fence)(shmem_ctx_t ctx);
void SHMOE_F(shmem_ctx_quiet)(shmem_ctx_t ctx);
/* OpenSHMEM 1.6 (9.12.3): quiet for the operations to some PEs (of the context's team). */
void SHMOE_F(shmem_pe_quiet)(const int* target_pes, size_t npes);
void SHMOE_F(shmem_ctx_pe_quiet)(shmem_ctx_t ctx, const int* target_pes, size_t npes);

/* ---- Distributed locking (9.12) ---------------------------------------------------------- */
/* The lock is a symmetric long set to 0 on every PE before first use. */
void SHMOE_F(shmem_set_lock)(long* lock);
void SHMOE_F(shmem_clear_lock)(long* lock);
int SHMOE_F(shmem_test_lock)(long* lock);

/* ---- Profiling control (section 10) ------------------------------------------------------ */
void SHMOE_F(shmem_pcontrol)(const int level, ...);

/* ---- Deprecated active-set collectives (Annex F) ----------------------------------------- */
void SHMOE_F(shmem_barrier)(int PE_start, int logPE_stride, int PE_size, long* pSync);
void SHMOE_F(shmem_sync)(int PE_start, int logPE_stride, int PE_size, long* pSync);
#define SHMOE_DECL_ACTIVE_SET_SIZED(BITS)                                                         \
  void SHMOE_F(shmem_broadcast##BITS)(void* dest, const void* source, size_t nelems, int PE_root, \
                                      int PE_start, int logPE_stride, int PE_size, long* pSync);  \
  void SHMOE_F(shmem_collect##BITS)(void* dest, const void* source, size_t nelems, int PE_start,  \
                                    int logPE_stride, int PE_size, long* pSync);                  \
  void SHMOE_F(shmem_fcollect##BITS)(void* dest, const void* source, size_t nelems, int PE_start, \
                                     int logPE_stride, int PE_size, long* pSync);                 \
  void SHMOE_F(shmem_alltoall##BITS)(void* dest, const void* source, size_t nelems, int PE_start, \
                                     int logPE_stride, int PE_size, long* pSync);                 \
  void SHMOE_F(shmem_alltoalls##BITS)(void* dest, const void* source, ptrdiff_t dst,              \
                                      ptrdiff_t sst, size_t nelems, int PE_start,                 \
                                      int logPE_stride, int PE_size, long* pSync);
SHMOE_DECL_ACTIVE_SET_SIZED(32)
SHMOE_DECL_ACTIVE_SET_SIZED(64)

#define SHMOE_DECL_TO_ALL(T, N, OP)                                                             \
  void SHMOE_F(shmem_##N##_##OP##_to_all)(T * dest, const T* source, int nreduce, int PE_start, \
                                          int logPE_stride, int PE_size, T* pWrk, long* pSync);
#define SHMOE_DECL_TO_ALL_BITWISE(T, N) \
  SHMOE_DECL_TO_ALL(T, N, and) SHMOE_DECL_TO_ALL(T, N, or) SHMOE_DECL_TO_ALL(T, N, xor)
#define SHMOE_DECL_TO_ALL_MINMAX(T, N) SHMOE_DECL_TO_ALL(T, N, max) SHMOE_DECL_TO_ALL(T, N, min)
#define SHMOE_DECL_TO_ALL_ARITH(T, N) SHMOE_DECL_TO_ALL(T, N, sum) SHMOE_DECL_TO_ALL(T, N, prod)
SHMOE_TO_ALL_BITWISE_TYPES(SHMOE_DECL_TO_ALL_BITWISE)
SHMOE_TO_ALL_MINMAX_TYPES(SHMOE_DECL_TO_ALL_MINMAX)
SHMOE_TO_ALL_ARITH_TYPES(SHMOE_DECL_TO_ALL_ARITH)

/* ---- Other deprecated routines older programs use (Annex F) ------------------------------ */
void SHMOE_F(start_pes)(int npes);
int SHMOE_F(_my_pe)(void);
int SHMOE_F(_num_pes)(void);
void* SHMOE_F(shmalloc)(size_t size);
void SHMOE_F(shfree)(void* ptr);
void* SHMOE_F(shrealloc)(void* ptr, size_t size);
void* SHMOE_F(shmemalign)(size_t alignment, size_t size);

#define SHMOE_DECL_AMO_OLD(T, N)                                   \
  T SHMOE_F(shmem_##N##_cswap)(T * dest, T cond, T value, int pe); \
  T SHMOE_F(shmem_##N##_fadd)(T * dest, T value, int pe);          \
  T SHMOE_F(shmem_##N##_finc)(T * dest, int pe);                   \
  void SHMOE_F(shmem_##N##_add)(T * dest, T value, int pe);        \
  void SHMOE_F(shmem_##N##_inc)(T * dest, int pe);
SHMOE_DEPRECATED_AMO_TYPES(SHMOE_DECL_AMO_OLD)
#define SHMOE_DECL_AMO_OLD_EXTENDED(T, N)                 \
  T SHMOE_F(shmem_##N##_swap)(T * dest, T value, int pe); \
  T SHMOE_F(shmem_##N##_fetch)(const T* source, int pe);  \
  void SHMOE_F(shmem_##N##_set)(T * dest, T value, int pe);
SHMOE_DEPRECATED_AMO_EXTENDED_TYPES(SHMOE_DECL_AMO_OLD_EXTENDED)
/* The long-typed names of before C11; in C11 shmem_swap and shmem_wait_until are type-generic
 * (shmoe/generic.h), and in C++ overloaded, so these symbols are reached by a C99 program. */
long SHMOE_F(shmem_swap)(long* dest, long value, int pe);
SHMOE_C_ONLY void SHMOE_F(shmem_wait_until)(long* ivar, int cmp, long cmp_value);

#define SHMOE_DECL_WAIT_OLD(T, N) void SHMOE_F(shmem_##N##_wait)(T * ivar, T cmp_value);
SHMOE_DEPRECATED_WAIT_TYPES(SHMOE_DECL_WAIT_OLD)
void SHMOE_F(shmem_wait)(long* ivar, long cmp_value);

/* Cache management (removed from the specification in 1.5, kept for old programs): shared
 * memory is coherent, so these do nothing. */
void SHMOE_F(shmem_clear_cache_inv)(void);
void SHMOE_F(shmem_set_cache_inv)(void);
void SHMOE_F(shmem_clear_cache_line_inv)(void* dest);
void SHMOE_F(shmem_set_cache_line_inv)(void* dest);
void SHMOE_F(shmem_udcflush)(void);
void SHMOE_F(shmem_udcflush_line)(void* dest);
