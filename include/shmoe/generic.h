/* The type-generic names of OpenSHMEM 1.5 (shmem_put, shmem_atomic_fetch_add, shmem_sum_reduce,
 * ...): C11 _Generic selections in C, overloaded inline functions in C++. Each family is one
 * association-list macro stamped over a table of shmoe/collective_types.h. Selection is on the
 * element type the first data pointer points to; the context forms take a shmem_ctx_t first.
 * Included by shmem.h; do not include directly.
 */
#ifndef SHMOE_GENERIC_H
#define SHMOE_GENERIC_H

#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L

/* Selected when no association matches: the call then fails to compile (too many arguments). */
void shmoe_generic_type_not_supported(void);

/* The first and second argument; the extra `~` keeps "..." non-empty for -pedantic. */
#define SHMOE_ARG0(...) SHMOE_ARG0_(__VA_ARGS__, ~)
#define SHMOE_ARG0_(a, ...) a
#define SHMOE_ARG1(...) SHMOE_ARG1_(__VA_ARGS__, ~)
#define SHMOE_ARG1_(a, b, ...) b
#define SHMOE_NARGS_SELECT(_1, _2, _3, _4, N, ...) N

/* One association per type: `T*: shmem_TYPENAME_F` (and `const T*` for source arguments). */

#define SHMOE_GA_PUT(T, N) T* : shmem_##N##_put,
#define SHMOE_GA_CTX_PUT(T, N) T* : shmem_ctx_##N##_put,
#define SHMOE_GA_PUT_NBI(T, N) T* : shmem_##N##_put_nbi,
#define SHMOE_GA_CTX_PUT_NBI(T, N) T* : shmem_ctx_##N##_put_nbi,
#define SHMOE_GA_GET(T, N) T* : shmem_##N##_get,
#define SHMOE_GA_CTX_GET(T, N) T* : shmem_ctx_##N##_get,
#define SHMOE_GA_GET_NBI(T, N) T* : shmem_##N##_get_nbi,
#define SHMOE_GA_CTX_GET_NBI(T, N) T* : shmem_ctx_##N##_get_nbi,
#define SHMOE_GA_IPUT(T, N) T* : shmem_##N##_iput,
#define SHMOE_GA_CTX_IPUT(T, N) T* : shmem_ctx_##N##_iput,
#define SHMOE_GA_IGET(T, N) T* : shmem_##N##_iget,
#define SHMOE_GA_CTX_IGET(T, N) T* : shmem_ctx_##N##_iget,
#define SHMOE_GA_P(T, N) T* : shmem_##N##_p,
#define SHMOE_GA_CTX_P(T, N) T* : shmem_ctx_##N##_p,
#define SHMOE_GA_G(T, N) T* : shmem_##N##_g, const T* : shmem_##N##_g,
#define SHMOE_GA_CTX_G(T, N) T* : shmem_ctx_##N##_g, const T* : shmem_ctx_##N##_g,
#define SHMOE_GA_PUT_SIGNAL(T, N) T* : shmem_##N##_put_signal,
#define SHMOE_GA_CTX_PUT_SIGNAL(T, N) T* : shmem_ctx_##N##_put_signal,
#define SHMOE_GA_PUT_SIGNAL_NBI(T, N) T* : shmem_##N##_put_signal_nbi,
#define SHMOE_GA_CTX_PUT_SIGNAL_NBI(T, N) T* : shmem_ctx_##N##_put_signal_nbi,
#define SHMOE_GA_ATOMIC_FETCH(T, N) \
  T* : shmem_##N##_atomic_fetch, const T* : shmem_##N##_atomic_fetch,
#define SHMOE_GA_CTX_ATOMIC_FETCH(T, N) \
  T* : shmem_ctx_##N##_atomic_fetch, const T* : shmem_ctx_##N##_atomic_fetch,
#define SHMOE_GA_ATOMIC_SET(T, N) T* : shmem_##N##_atomic_set,
#define SHMOE_GA_CTX_ATOMIC_SET(T, N) T* : shmem_ctx_##N##_atomic_set,
#define SHMOE_GA_ATOMIC_SWAP(T, N) T* : shmem_##N##_atomic_swap,
#define SHMOE_GA_CTX_ATOMIC_SWAP(T, N) T* : shmem_ctx_##N##_atomic_swap,
#define SHMOE_GA_ATOMIC_COMPARE_SWAP(T, N) T* : shmem_##N##_atomic_compare_swap,
#define SHMOE_GA_CTX_ATOMIC_COMPARE_SWAP(T, N) T* : shmem_ctx_##N##_atomic_compare_swap,
#define SHMOE_GA_ATOMIC_FETCH_INC(T, N) T* : shmem_##N##_atomic_fetch_inc,
#define SHMOE_GA_CTX_ATOMIC_FETCH_INC(T, N) T* : shmem_ctx_##N##_atomic_fetch_inc,
#define SHMOE_GA_ATOMIC_INC(T, N) T* : shmem_##N##_atomic_inc,
#define SHMOE_GA_CTX_ATOMIC_INC(T, N) T* : shmem_ctx_##N##_atomic_inc,
#define SHMOE_GA_ATOMIC_FETCH_ADD(T, N) T* : shmem_##N##_atomic_fetch_add,
#define SHMOE_GA_CTX_ATOMIC_FETCH_ADD(T, N) T* : shmem_ctx_##N##_atomic_fetch_add,
#define SHMOE_GA_ATOMIC_ADD(T, N) T* : shmem_##N##_atomic_add,
#define SHMOE_GA_CTX_ATOMIC_ADD(T, N) T* : shmem_ctx_##N##_atomic_add,
#define SHMOE_GA_ATOMIC_FETCH_AND(T, N) T* : shmem_##N##_atomic_fetch_and,
#define SHMOE_GA_CTX_ATOMIC_FETCH_AND(T, N) T* : shmem_ctx_##N##_atomic_fetch_and,
#define SHMOE_GA_ATOMIC_AND(T, N) T* : shmem_##N##_atomic_and,
#define SHMOE_GA_CTX_ATOMIC_AND(T, N) T* : shmem_ctx_##N##_atomic_and,
#define SHMOE_GA_ATOMIC_FETCH_OR(T, N) T* : shmem_##N##_atomic_fetch_or,
#define SHMOE_GA_CTX_ATOMIC_FETCH_OR(T, N) T* : shmem_ctx_##N##_atomic_fetch_or,
#define SHMOE_GA_ATOMIC_OR(T, N) T* : shmem_##N##_atomic_or,
#define SHMOE_GA_CTX_ATOMIC_OR(T, N) T* : shmem_ctx_##N##_atomic_or,
#define SHMOE_GA_ATOMIC_FETCH_XOR(T, N) T* : shmem_##N##_atomic_fetch_xor,
#define SHMOE_GA_CTX_ATOMIC_FETCH_XOR(T, N) T* : shmem_ctx_##N##_atomic_fetch_xor,
#define SHMOE_GA_ATOMIC_XOR(T, N) T* : shmem_##N##_atomic_xor,
#define SHMOE_GA_CTX_ATOMIC_XOR(T, N) T* : shmem_ctx_##N##_atomic_xor,
#define SHMOE_GA_WAIT_UNTIL(T, N) T* : shmem_##N##_wait_until,
#define SHMOE_GA_WAIT_UNTIL_ALL(T, N) T* : shmem_##N##_wait_until_all,
#define SHMOE_GA_WAIT_UNTIL_ANY(T, N) T* : shmem_##N##_wait_until_any,
#define SHMOE_GA_WAIT_UNTIL_SOME(T, N) T* : shmem_##N##_wait_until_some,
#define SHMOE_GA_TEST(T, N) T* : shmem_##N##_test,
#define SHMOE_GA_TEST_ALL(T, N) T* : shmem_##N##_test_all,
#define SHMOE_GA_TEST_ANY(T, N) T* : shmem_##N##_test_any,
#define SHMOE_GA_TEST_SOME(T, N) T* : shmem_##N##_test_some,
#define SHMOE_GA_BROADCAST(T, N) T* : shmem_##N##_broadcast,
#define SHMOE_GA_COLLECT(T, N) T* : shmem_##N##_collect,
#define SHMOE_GA_FCOLLECT(T, N) T* : shmem_##N##_fcollect,
#define SHMOE_GA_ALLTOALL(T, N) T* : shmem_##N##_alltoall,
#define SHMOE_GA_ALLTOALLS(T, N) T* : shmem_##N##_alltoalls,
#define SHMOE_GA_AND_REDUCE(T, N) T* : shmem_##N##_and_reduce,
#define SHMOE_GA_OR_REDUCE(T, N) T* : shmem_##N##_or_reduce,
#define SHMOE_GA_XOR_REDUCE(T, N) T* : shmem_##N##_xor_reduce,
#define SHMOE_GA_MAX_REDUCE(T, N) T* : shmem_##N##_max_reduce,
#define SHMOE_GA_MIN_REDUCE(T, N) T* : shmem_##N##_min_reduce,
#define SHMOE_GA_SUM_REDUCE(T, N) T* : shmem_##N##_sum_reduce,
#define SHMOE_GA_PROD_REDUCE(T, N) T* : shmem_##N##_prod_reduce,

/* Plain forms select on the first argument; context forms on the second. */
#define SHMOE_GENERIC_CTX(TABLE, PLAIN, CTX, ...)                   \
  _Generic((SHMOE_ARG0(__VA_ARGS__)), shmem_ctx_t                   \
           : _Generic((SHMOE_ARG1(__VA_ARGS__)), TABLE(CTX) default \
                      : shmoe_generic_type_not_supported),          \
             TABLE(PLAIN) default                                   \
           : shmoe_generic_type_not_supported)(__VA_ARGS__)
#define SHMOE_GENERIC_ARG0(TABLE, PLAIN, ...)              \
  _Generic((SHMOE_ARG0(__VA_ARGS__)), TABLE(PLAIN) default \
           : shmoe_generic_type_not_supported)(__VA_ARGS__)
#define SHMOE_GENERIC_ARG1(TABLE, PLAIN, ...)              \
  _Generic((SHMOE_ARG1(__VA_ARGS__)), TABLE(PLAIN) default \
           : shmoe_generic_type_not_supported)(__VA_ARGS__)

#define shmem_put(...) \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_PUT, SHMOE_GA_CTX_PUT, __VA_ARGS__)
#define shmem_put_nbi(...) \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_PUT_NBI, SHMOE_GA_CTX_PUT_NBI, __VA_ARGS__)
#define shmem_get(...) \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_GET, SHMOE_GA_CTX_GET, __VA_ARGS__)
#define shmem_get_nbi(...) \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_GET_NBI, SHMOE_GA_CTX_GET_NBI, __VA_ARGS__)
#define shmem_iput(...) \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_IPUT, SHMOE_GA_CTX_IPUT, __VA_ARGS__)
#define shmem_iget(...) \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_IGET, SHMOE_GA_CTX_IGET, __VA_ARGS__)
#define shmem_p(...) \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_P, SHMOE_GA_CTX_P, __VA_ARGS__)
#define shmem_g(...) \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_G, SHMOE_GA_CTX_G, __VA_ARGS__)
#define shmem_put_signal(...)                                                              \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_PUT_SIGNAL, SHMOE_GA_CTX_PUT_SIGNAL, \
                    __VA_ARGS__)
#define shmem_put_signal_nbi(...)                                                                  \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_PUT_SIGNAL_NBI, SHMOE_GA_CTX_PUT_SIGNAL_NBI, \
                    __VA_ARGS__)
#define shmem_atomic_fetch(...)                                              \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_AMO_EXTENDED_TYPES, SHMOE_GA_ATOMIC_FETCH, \
                    SHMOE_GA_CTX_ATOMIC_FETCH, __VA_ARGS__)
#define shmem_atomic_set(...)                                              \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_AMO_EXTENDED_TYPES, SHMOE_GA_ATOMIC_SET, \
                    SHMOE_GA_CTX_ATOMIC_SET, __VA_ARGS__)
#define shmem_atomic_swap(...)                                              \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_AMO_EXTENDED_TYPES, SHMOE_GA_ATOMIC_SWAP, \
                    SHMOE_GA_CTX_ATOMIC_SWAP, __VA_ARGS__)
#define shmem_atomic_compare_swap(...)                                     \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_ATOMIC_COMPARE_SWAP, \
                    SHMOE_GA_CTX_ATOMIC_COMPARE_SWAP, __VA_ARGS__)
#define shmem_atomic_fetch_inc(...)                                     \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_ATOMIC_FETCH_INC, \
                    SHMOE_GA_CTX_ATOMIC_FETCH_INC, __VA_ARGS__)
#define shmem_atomic_inc(...)                                                              \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_ATOMIC_INC, SHMOE_GA_CTX_ATOMIC_INC, \
                    __VA_ARGS__)
#define shmem_atomic_fetch_add(...)                                     \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_ATOMIC_FETCH_ADD, \
                    SHMOE_GA_CTX_ATOMIC_FETCH_ADD, __VA_ARGS__)
#define shmem_atomic_add(...)                                                              \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_ATOMIC_ADD, SHMOE_GA_CTX_ATOMIC_ADD, \
                    __VA_ARGS__)
#define shmem_atomic_fetch_and(...)                                         \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_BITWISE_TYPES, SHMOE_GA_ATOMIC_FETCH_AND, \
                    SHMOE_GA_CTX_ATOMIC_FETCH_AND, __VA_ARGS__)
#define shmem_atomic_and(...)                                                                  \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_BITWISE_TYPES, SHMOE_GA_ATOMIC_AND, SHMOE_GA_CTX_ATOMIC_AND, \
                    __VA_ARGS__)
#define shmem_atomic_fetch_or(...)                                         \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_BITWISE_TYPES, SHMOE_GA_ATOMIC_FETCH_OR, \
                    SHMOE_GA_CTX_ATOMIC_FETCH_OR, __VA_ARGS__)
#define shmem_atomic_or(...)                                                                 \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_BITWISE_TYPES, SHMOE_GA_ATOMIC_OR, SHMOE_GA_CTX_ATOMIC_OR, \
                    __VA_ARGS__)
#define shmem_atomic_fetch_xor(...)                                         \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_BITWISE_TYPES, SHMOE_GA_ATOMIC_FETCH_XOR, \
                    SHMOE_GA_CTX_ATOMIC_FETCH_XOR, __VA_ARGS__)
#define shmem_atomic_xor(...)                                                                  \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_BITWISE_TYPES, SHMOE_GA_ATOMIC_XOR, SHMOE_GA_CTX_ATOMIC_XOR, \
                    __VA_ARGS__)
#define shmem_wait_until(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_WAIT_UNTIL, __VA_ARGS__)
#define shmem_wait_until_all(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_WAIT_UNTIL_ALL, __VA_ARGS__)
#define shmem_wait_until_any(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_WAIT_UNTIL_ANY, __VA_ARGS__)
#define shmem_wait_until_some(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_WAIT_UNTIL_SOME, __VA_ARGS__)
#define shmem_test(...) SHMOE_GENERIC_ARG0(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_TEST, __VA_ARGS__)
#define shmem_test_all(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_TEST_ALL, __VA_ARGS__)
#define shmem_test_any(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_TEST_ANY, __VA_ARGS__)
#define shmem_test_some(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_TEST_SOME, __VA_ARGS__)
#define shmem_broadcast(...) \
  SHMOE_GENERIC_ARG1(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_BROADCAST, __VA_ARGS__)
#define shmem_collect(...) \
  SHMOE_GENERIC_ARG1(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_COLLECT, __VA_ARGS__)
#define shmem_fcollect(...) \
  SHMOE_GENERIC_ARG1(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_FCOLLECT, __VA_ARGS__)
#define shmem_alltoall(...) \
  SHMOE_GENERIC_ARG1(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_ALLTOALL, __VA_ARGS__)
#define shmem_alltoalls(...) \
  SHMOE_GENERIC_ARG1(SHMOE_GENERIC_RMA_TYPES, SHMOE_GA_ALLTOALLS, __VA_ARGS__)
#define shmem_and_reduce(...) \
  SHMOE_GENERIC_ARG1(SHMOE_GENERIC_REDUCE_BITWISE_TYPES, SHMOE_GA_AND_REDUCE, __VA_ARGS__)
#define shmem_or_reduce(...) \
  SHMOE_GENERIC_ARG1(SHMOE_GENERIC_REDUCE_BITWISE_TYPES, SHMOE_GA_OR_REDUCE, __VA_ARGS__)
#define shmem_xor_reduce(...) \
  SHMOE_GENERIC_ARG1(SHMOE_GENERIC_REDUCE_BITWISE_TYPES, SHMOE_GA_XOR_REDUCE, __VA_ARGS__)
#define shmem_max_reduce(...) \
  SHMOE_GENERIC_ARG1(SHMOE_GENERIC_REDUCE_MINMAX_TYPES, SHMOE_GA_MAX_REDUCE, __VA_ARGS__)
#define shmem_min_reduce(...) \
  SHMOE_GENERIC_ARG1(SHMOE_GENERIC_REDUCE_MINMAX_TYPES, SHMOE_GA_MIN_REDUCE, __VA_ARGS__)
#define shmem_sum_reduce(...) \
  SHMOE_GENERIC_ARG1(SHMOE_GENERIC_REDUCE_ARITH_TYPES, SHMOE_GA_SUM_REDUCE, __VA_ARGS__)
#define shmem_prod_reduce(...) \
  SHMOE_GENERIC_ARG1(SHMOE_GENERIC_REDUCE_ARITH_TYPES, SHMOE_GA_PROD_REDUCE, __VA_ARGS__)

/* shmem_sync(team) is shmem_team_sync; with four arguments it is the deprecated active-set
 * shmem_sync (the function of that name). */
#define shmem_sync(...)                                                           \
  SHMOE_NARGS_SELECT(__VA_ARGS__, (shmem_sync), shmoe_generic_type_not_supported, \
                     shmoe_generic_type_not_supported, shmem_team_sync, )         \
  (__VA_ARGS__)

#elif defined(__cplusplus)

/* C++: one overload per type and family, stamped from the same tables. */
#define SHMOE_CXX_RMA(T, N)                                                                   \
  inline void shmem_put(T* d, const T* s, size_t n, int pe) {                                 \
    shmem_##N##_put(d, s, n, pe);                                                             \
  }                                                                                           \
  inline void shmem_put(shmem_ctx_t c, T* d, const T* s, size_t n, int pe) {                  \
    shmem_ctx_##N##_put(c, d, s, n, pe);                                                      \
  }                                                                                           \
  inline void shmem_put_nbi(T* d, const T* s, size_t n, int pe) {                             \
    shmem_##N##_put_nbi(d, s, n, pe);                                                         \
  }                                                                                           \
  inline void shmem_put_nbi(shmem_ctx_t c, T* d, const T* s, size_t n, int pe) {              \
    shmem_ctx_##N##_put_nbi(c, d, s, n, pe);                                                  \
  }                                                                                           \
  inline void shmem_get(T* d, const T* s, size_t n, int pe) {                                 \
    shmem_##N##_get(d, s, n, pe);                                                             \
  }                                                                                           \
  inline void shmem_get(shmem_ctx_t c, T* d, const T* s, size_t n, int pe) {                  \
    shmem_ctx_##N##_get(c, d, s, n, pe);                                                      \
  }                                                                                           \
  inline void shmem_get_nbi(T* d, const T* s, size_t n, int pe) {                             \
    shmem_##N##_get_nbi(d, s, n, pe);                                                         \
  }                                                                                           \
  inline void shmem_get_nbi(shmem_ctx_t c, T* d, const T* s, size_t n, int pe) {              \
    shmem_ctx_##N##_get_nbi(c, d, s, n, pe);                                                  \
  }                                                                                           \
  inline void shmem_iput(T* d, const T* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) {  \
    shmem_##N##_iput(d, s, dst, sst, n, pe);                                                  \
  }                                                                                           \
  inline void shmem_iget(T* d, const T* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) {  \
    shmem_##N##_iget(d, s, dst, sst, n, pe);                                                  \
  }                                                                                           \
  inline void shmem_p(T* d, T v, int pe) {                                                    \
    shmem_##N##_p(d, v, pe);                                                                  \
  }                                                                                           \
  inline void shmem_p(shmem_ctx_t c, T* d, T v, int pe) {                                     \
    shmem_ctx_##N##_p(c, d, v, pe);                                                           \
  }                                                                                           \
  inline T shmem_g(const T* s, int pe) {                                                      \
    return shmem_##N##_g(s, pe);                                                              \
  }                                                                                           \
  inline T shmem_g(shmem_ctx_t c, const T* s, int pe) {                                       \
    return shmem_ctx_##N##_g(c, s, pe);                                                       \
  }                                                                                           \
  inline void shmem_put_signal(T* d, const T* s, size_t n, uint64_t* sig, uint64_t v, int op, \
                               int pe) {                                                      \
    shmem_##N##_put_signal(d, s, n, sig, v, op, pe);                                          \
  }                                                                                           \
  inline int shmem_broadcast(shmem_team_t t, T* d, const T* s, size_t n, int root) {          \
    return shmem_##N##_broadcast(t, d, s, n, root);                                           \
  }                                                                                           \
  inline int shmem_collect(shmem_team_t t, T* d, const T* s, size_t n) {                      \
    return shmem_##N##_collect(t, d, s, n);                                                   \
  }                                                                                           \
  inline int shmem_fcollect(shmem_team_t t, T* d, const T* s, size_t n) {                     \
    return shmem_##N##_fcollect(t, d, s, n);                                                  \
  }                                                                                           \
  inline int shmem_alltoall(shmem_team_t t, T* d, const T* s, size_t n) {                     \
    return shmem_##N##_alltoall(t, d, s, n);                                                  \
  }                                                                                           \
  inline int shmem_alltoalls(shmem_team_t t, T* d, const T* s, ptrdiff_t dst, ptrdiff_t sst,  \
                             size_t n) {                                                      \
    return shmem_##N##_alltoalls(t, d, s, dst, sst, n);                                       \
  }
SHMOE_GENERIC_RMA_TYPES(SHMOE_CXX_RMA)

#define SHMOE_CXX_AMO_EXTENDED(T, N)                               \
  inline T shmem_atomic_fetch(const T* s, int pe) {                \
    return shmem_##N##_atomic_fetch(s, pe);                        \
  }                                                                \
  inline T shmem_atomic_fetch(shmem_ctx_t c, const T* s, int pe) { \
    return shmem_ctx_##N##_atomic_fetch(c, s, pe);                 \
  }                                                                \
  inline void shmem_atomic_set(T* d, T v, int pe) {                \
    shmem_##N##_atomic_set(d, v, pe);                              \
  }                                                                \
  inline void shmem_atomic_set(shmem_ctx_t c, T* d, T v, int pe) { \
    shmem_ctx_##N##_atomic_set(c, d, v, pe);                       \
  }                                                                \
  inline T shmem_atomic_swap(T* d, T v, int pe) {                  \
    return shmem_##N##_atomic_swap(d, v, pe);                      \
  }                                                                \
  inline T shmem_atomic_swap(shmem_ctx_t c, T* d, T v, int pe) {   \
    return shmem_ctx_##N##_atomic_swap(c, d, v, pe);               \
  }
SHMOE_GENERIC_AMO_EXTENDED_TYPES(SHMOE_CXX_AMO_EXTENDED)

#define SHMOE_CXX_AMO_INT(T, N)                                                  \
  inline T shmem_atomic_compare_swap(T* d, T cond, T v, int pe) {                \
    return shmem_##N##_atomic_compare_swap(d, cond, v, pe);                      \
  }                                                                              \
  inline T shmem_atomic_compare_swap(shmem_ctx_t c, T* d, T cond, T v, int pe) { \
    return shmem_ctx_##N##_atomic_compare_swap(c, d, cond, v, pe);               \
  }                                                                              \
  inline T shmem_atomic_fetch_inc(T* d, int pe) {                                \
    return shmem_##N##_atomic_fetch_inc(d, pe);                                  \
  }                                                                              \
  inline T shmem_atomic_fetch_inc(shmem_ctx_t c, T* d, int pe) {                 \
    return shmem_ctx_##N##_atomic_fetch_inc(c, d, pe);                           \
  }                                                                              \
  inline void shmem_atomic_inc(T* d, int pe) {                                   \
    shmem_##N##_atomic_inc(d, pe);                                               \
  }                                                                              \
  inline void shmem_atomic_inc(shmem_ctx_t c, T* d, int pe) {                    \
    shmem_ctx_##N##_atomic_inc(c, d, pe);                                        \
  }                                                                              \
  inline T shmem_atomic_fetch_add(T* d, T v, int pe) {                           \
    return shmem_##N##_atomic_fetch_add(d, v, pe);                               \
  }                                                                              \
  inline T shmem_atomic_fetch_add(shmem_ctx_t c, T* d, T v, int pe) {            \
    return shmem_ctx_##N##_atomic_fetch_add(c, d, v, pe);                        \
  }                                                                              \
  inline void shmem_atomic_add(T* d, T v, int pe) {                              \
    shmem_##N##_atomic_add(d, v, pe);                                            \
  }                                                                              \
  inline void shmem_atomic_add(shmem_ctx_t c, T* d, T v, int pe) {               \
    shmem_ctx_##N##_atomic_add(c, d, v, pe);                                     \
  }                                                                              \
  inline void shmem_wait_until(T* ivar, int cmp, T v) {                          \
    shmem_##N##_wait_until(ivar, cmp, v);                                        \
  }                                                                              \
  inline int shmem_test(T* ivar, int cmp, T v) {                                 \
    return shmem_##N##_test(ivar, cmp, v);                                       \
  }
SHMOE_GENERIC_INT_TYPES(SHMOE_CXX_AMO_INT)

#define SHMOE_CXX_AMO_BITWISE_OP(T, N, OP)              \
  inline T shmem_atomic_fetch_##OP(T* d, T v, int pe) { \
    return shmem_##N##_atomic_fetch_##OP(d, v, pe);     \
  }                                                     \
  inline void shmem_atomic_##OP(T* d, T v, int pe) {    \
    shmem_##N##_atomic_##OP(d, v, pe);                  \
  }
#define SHMOE_CXX_AMO_BITWISE(T, N)   \
  SHMOE_CXX_AMO_BITWISE_OP(T, N, and) \
  SHMOE_CXX_AMO_BITWISE_OP(T, N, or)  \
  SHMOE_CXX_AMO_BITWISE_OP(T, N, xor)
SHMOE_GENERIC_BITWISE_TYPES(SHMOE_CXX_AMO_BITWISE)

#define SHMOE_CXX_REDUCE(T, N, OP)                                             \
  inline int shmem_##OP##_reduce(shmem_team_t t, T* d, const T* s, size_t n) { \
    return shmem_##N##_##OP##_reduce(t, d, s, n);                              \
  }
#define SHMOE_CXX_REDUCE_BITWISE(T, N) \
  SHMOE_CXX_REDUCE(T, N, and) SHMOE_CXX_REDUCE(T, N, or) SHMOE_CXX_REDUCE(T, N, xor)
#define SHMOE_CXX_REDUCE_MINMAX(T, N) SHMOE_CXX_REDUCE(T, N, max) SHMOE_CXX_REDUCE(T, N, min)
#define SHMOE_CXX_REDUCE_ARITH(T, N) SHMOE_CXX_REDUCE(T, N, sum) SHMOE_CXX_REDUCE(T, N, prod)
SHMOE_GENERIC_REDUCE_BITWISE_TYPES(SHMOE_CXX_REDUCE_BITWISE)
SHMOE_GENERIC_REDUCE_MINMAX_TYPES(SHMOE_CXX_REDUCE_MINMAX)
SHMOE_GENERIC_REDUCE_ARITH_TYPES(SHMOE_CXX_REDUCE_ARITH)

inline int shmem_sync(shmem_team_t team) {
  return shmem_team_sync(team);
}

#endif

#endif
