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
#define SHMOE_GA_ATOMIC_FETCH_NBI(T, N) T* : shmem_##N##_atomic_fetch_nbi,
#define SHMOE_GA_CTX_ATOMIC_FETCH_NBI(T, N) T* : shmem_ctx_##N##_atomic_fetch_nbi,
#define SHMOE_GA_ATOMIC_SWAP_NBI(T, N) T* : shmem_##N##_atomic_swap_nbi,
#define SHMOE_GA_CTX_ATOMIC_SWAP_NBI(T, N) T* : shmem_ctx_##N##_atomic_swap_nbi,
#define SHMOE_GA_ATOMIC_COMPARE_SWAP_NBI(T, N) T* : shmem_##N##_atomic_compare_swap_nbi,
#define SHMOE_GA_CTX_ATOMIC_COMPARE_SWAP_NBI(T, N) T* : shmem_ctx_##N##_atomic_compare_swap_nbi,
#define SHMOE_GA_ATOMIC_FETCH_INC_NBI(T, N) T* : shmem_##N##_atomic_fetch_inc_nbi,
#define SHMOE_GA_CTX_ATOMIC_FETCH_INC_NBI(T, N) T* : shmem_ctx_##N##_atomic_fetch_inc_nbi,
#define SHMOE_GA_ATOMIC_FETCH_ADD_NBI(T, N) T* : shmem_##N##_atomic_fetch_add_nbi,
#define SHMOE_GA_CTX_ATOMIC_FETCH_ADD_NBI(T, N) T* : shmem_ctx_##N##_atomic_fetch_add_nbi,
#define SHMOE_GA_ATOMIC_FETCH_AND_NBI(T, N) T* : shmem_##N##_atomic_fetch_and_nbi,
#define SHMOE_GA_CTX_ATOMIC_FETCH_AND_NBI(T, N) T* : shmem_ctx_##N##_atomic_fetch_and_nbi,
#define SHMOE_GA_ATOMIC_FETCH_OR_NBI(T, N) T* : shmem_##N##_atomic_fetch_or_nbi,
#define SHMOE_GA_CTX_ATOMIC_FETCH_OR_NBI(T, N) T* : shmem_ctx_##N##_atomic_fetch_or_nbi,
#define SHMOE_GA_ATOMIC_FETCH_XOR_NBI(T, N) T* : shmem_##N##_atomic_fetch_xor_nbi,
#define SHMOE_GA_CTX_ATOMIC_FETCH_XOR_NBI(T, N) T* : shmem_ctx_##N##_atomic_fetch_xor_nbi,
#define SHMOE_GA_WAIT_UNTIL(T, N) T* : shmem_##N##_wait_until,
#define SHMOE_GA_WAIT_UNTIL_ALL(T, N) T* : shmem_##N##_wait_until_all,
#define SHMOE_GA_WAIT_UNTIL_ANY(T, N) T* : shmem_##N##_wait_until_any,
#define SHMOE_GA_WAIT_UNTIL_SOME(T, N) T* : shmem_##N##_wait_until_some,
#define SHMOE_GA_TEST(T, N) T* : shmem_##N##_test,
#define SHMOE_GA_TEST_ALL(T, N) T* : shmem_##N##_test_all,
#define SHMOE_GA_TEST_ANY(T, N) T* : shmem_##N##_test_any,
#define SHMOE_GA_TEST_SOME(T, N) T* : shmem_##N##_test_some,
#define SHMOE_GA_WAIT_UNTIL_ALL_VECTOR(T, N) T* : shmem_##N##_wait_until_all_vector,
#define SHMOE_GA_WAIT_UNTIL_ANY_VECTOR(T, N) T* : shmem_##N##_wait_until_any_vector,
#define SHMOE_GA_WAIT_UNTIL_SOME_VECTOR(T, N) T* : shmem_##N##_wait_until_some_vector,
#define SHMOE_GA_TEST_ALL_VECTOR(T, N) T* : shmem_##N##_test_all_vector,
#define SHMOE_GA_TEST_ANY_VECTOR(T, N) T* : shmem_##N##_test_any_vector,
#define SHMOE_GA_TEST_SOME_VECTOR(T, N) T* : shmem_##N##_test_some_vector,
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
/* The type-generic names OpenSHMEM 1.4 deprecated (Annex F), for programs written before. */
#define SHMOE_GA_OLD_FETCH(T, N) T* : shmem_##N##_fetch, const T* : shmem_##N##_fetch,
#define SHMOE_GA_OLD_SET(T, N) T* : shmem_##N##_set,
#define SHMOE_GA_OLD_SWAP(T, N) T* : shmem_##N##_swap,
#define SHMOE_GA_OLD_CSWAP(T, N) T* : shmem_##N##_cswap,
#define SHMOE_GA_OLD_FINC(T, N) T* : shmem_##N##_finc,
#define SHMOE_GA_OLD_INC(T, N) T* : shmem_##N##_inc,
#define SHMOE_GA_OLD_FADD(T, N) T* : shmem_##N##_fadd,
#define SHMOE_GA_OLD_ADD(T, N) T* : shmem_##N##_add,

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
#define shmem_atomic_fetch_nbi(...)                                              \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_AMO_EXTENDED_TYPES, SHMOE_GA_ATOMIC_FETCH_NBI, \
                    SHMOE_GA_CTX_ATOMIC_FETCH_NBI, __VA_ARGS__)
#define shmem_atomic_swap_nbi(...)                                              \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_AMO_EXTENDED_TYPES, SHMOE_GA_ATOMIC_SWAP_NBI, \
                    SHMOE_GA_CTX_ATOMIC_SWAP_NBI, __VA_ARGS__)
#define shmem_atomic_compare_swap_nbi(...)                                     \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_ATOMIC_COMPARE_SWAP_NBI, \
                    SHMOE_GA_CTX_ATOMIC_COMPARE_SWAP_NBI, __VA_ARGS__)
#define shmem_atomic_fetch_inc_nbi(...)                                     \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_ATOMIC_FETCH_INC_NBI, \
                    SHMOE_GA_CTX_ATOMIC_FETCH_INC_NBI, __VA_ARGS__)
#define shmem_atomic_fetch_add_nbi(...)                                     \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_INT_TYPES, SHMOE_GA_ATOMIC_FETCH_ADD_NBI, \
                    SHMOE_GA_CTX_ATOMIC_FETCH_ADD_NBI, __VA_ARGS__)
#define shmem_atomic_fetch_and_nbi(...)                                         \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_BITWISE_TYPES, SHMOE_GA_ATOMIC_FETCH_AND_NBI, \
                    SHMOE_GA_CTX_ATOMIC_FETCH_AND_NBI, __VA_ARGS__)
#define shmem_atomic_fetch_or_nbi(...)                                         \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_BITWISE_TYPES, SHMOE_GA_ATOMIC_FETCH_OR_NBI, \
                    SHMOE_GA_CTX_ATOMIC_FETCH_OR_NBI, __VA_ARGS__)
#define shmem_atomic_fetch_xor_nbi(...)                                         \
  SHMOE_GENERIC_CTX(SHMOE_GENERIC_BITWISE_TYPES, SHMOE_GA_ATOMIC_FETCH_XOR_NBI, \
                    SHMOE_GA_CTX_ATOMIC_FETCH_XOR_NBI, __VA_ARGS__)
#define shmem_wait_until(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_P2P_TYPES, SHMOE_GA_WAIT_UNTIL, __VA_ARGS__)
#define shmem_wait_until_all(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_P2P_TYPES, SHMOE_GA_WAIT_UNTIL_ALL, __VA_ARGS__)
#define shmem_wait_until_any(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_P2P_TYPES, SHMOE_GA_WAIT_UNTIL_ANY, __VA_ARGS__)
#define shmem_wait_until_some(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_P2P_TYPES, SHMOE_GA_WAIT_UNTIL_SOME, __VA_ARGS__)
#define shmem_wait_until_all_vector(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_P2P_TYPES, SHMOE_GA_WAIT_UNTIL_ALL_VECTOR, __VA_ARGS__)
#define shmem_wait_until_any_vector(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_P2P_TYPES, SHMOE_GA_WAIT_UNTIL_ANY_VECTOR, __VA_ARGS__)
#define shmem_wait_until_some_vector(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_P2P_TYPES, SHMOE_GA_WAIT_UNTIL_SOME_VECTOR, __VA_ARGS__)
#define shmem_test(...) SHMOE_GENERIC_ARG0(SHMOE_GENERIC_P2P_TYPES, SHMOE_GA_TEST, __VA_ARGS__)
#define shmem_test_all(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_P2P_TYPES, SHMOE_GA_TEST_ALL, __VA_ARGS__)
#define shmem_test_any(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_P2P_TYPES, SHMOE_GA_TEST_ANY, __VA_ARGS__)
#define shmem_test_some(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_P2P_TYPES, SHMOE_GA_TEST_SOME, __VA_ARGS__)
#define shmem_test_all_vector(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_P2P_TYPES, SHMOE_GA_TEST_ALL_VECTOR, __VA_ARGS__)
#define shmem_test_any_vector(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_P2P_TYPES, SHMOE_GA_TEST_ANY_VECTOR, __VA_ARGS__)
#define shmem_test_some_vector(...) \
  SHMOE_GENERIC_ARG0(SHMOE_GENERIC_P2P_TYPES, SHMOE_GA_TEST_SOME_VECTOR, __VA_ARGS__)
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

/* Deprecated by OpenSHMEM 1.4 (Annex F); the long-typed C function shmem_swap is what a C99
 * program reaches under this name. */
#define shmem_fetch(...) \
  SHMOE_GENERIC_ARG0(SHMOE_DEPRECATED_AMO_EXTENDED_TYPES, SHMOE_GA_OLD_FETCH, __VA_ARGS__)
#define shmem_set(...) \
  SHMOE_GENERIC_ARG0(SHMOE_DEPRECATED_AMO_EXTENDED_TYPES, SHMOE_GA_OLD_SET, __VA_ARGS__)
#define shmem_swap(...) \
  SHMOE_GENERIC_ARG0(SHMOE_DEPRECATED_AMO_EXTENDED_TYPES, SHMOE_GA_OLD_SWAP, __VA_ARGS__)
#define shmem_cswap(...) \
  SHMOE_GENERIC_ARG0(SHMOE_DEPRECATED_AMO_TYPES, SHMOE_GA_OLD_CSWAP, __VA_ARGS__)
#define shmem_finc(...) \
  SHMOE_GENERIC_ARG0(SHMOE_DEPRECATED_AMO_TYPES, SHMOE_GA_OLD_FINC, __VA_ARGS__)
#define shmem_inc(...) SHMOE_GENERIC_ARG0(SHMOE_DEPRECATED_AMO_TYPES, SHMOE_GA_OLD_INC, __VA_ARGS__)
#define shmem_fadd(...) \
  SHMOE_GENERIC_ARG0(SHMOE_DEPRECATED_AMO_TYPES, SHMOE_GA_OLD_FADD, __VA_ARGS__)
#define shmem_add(...) SHMOE_GENERIC_ARG0(SHMOE_DEPRECATED_AMO_TYPES, SHMOE_GA_OLD_ADD, __VA_ARGS__)

/* shmem_sync(team) is shmem_team_sync; with four arguments it is the deprecated active-set
 * shmem_sync (the function of that name). */
#define shmem_sync(...)                                                           \
  SHMOE_NARGS_SELECT(__VA_ARGS__, (shmem_sync), shmoe_generic_type_not_supported, \
                     shmoe_generic_type_not_supported, shmem_team_sync, )         \
  (__VA_ARGS__)

#elif defined(__cplusplus) && !defined(SHMOE_NO_CXX_OVERLOADS)

/* C++: one overload per type and family, stamped from the same tables. A context form is the
 * same overload with a shmem_ctx_t first. (SHMOE_NO_CXX_OVERLOADS: for the library file that
 * defines the C symbol shmem_wait_until, which the long overload would clash with.) */
#define SHMOE_CXX_BOTH(RET, NAME, TYPED, PARAMS, ARGS)         \
  inline RET NAME PARAMS {                                     \
    return shmem_##TYPED ARGS;                                 \
  }                                                            \
  inline RET NAME(shmem_ctx_t ctx, SHMOE_CXX_UNPAREN PARAMS) { \
    return shmem_ctx_##TYPED(ctx, SHMOE_CXX_UNPAREN ARGS);     \
  }
#define SHMOE_CXX_ONE(RET, NAME, TYPED, PARAMS, ARGS) \
  inline RET NAME PARAMS {                            \
    return shmem_##TYPED ARGS;                        \
  }
#define SHMOE_CXX_UNPAREN(...) __VA_ARGS__

#define SHMOE_CXX_RMA(T, N)                                                                       \
  SHMOE_CXX_BOTH(void, shmem_put, N##_put, (T * d, const T* s, size_t n, int pe), (d, s, n, pe))  \
  SHMOE_CXX_BOTH(void, shmem_put_nbi, N##_put_nbi, (T * d, const T* s, size_t n, int pe),         \
                 (d, s, n, pe))                                                                   \
  SHMOE_CXX_BOTH(void, shmem_get, N##_get, (T * d, const T* s, size_t n, int pe), (d, s, n, pe))  \
  SHMOE_CXX_BOTH(void, shmem_get_nbi, N##_get_nbi, (T * d, const T* s, size_t n, int pe),         \
                 (d, s, n, pe))                                                                   \
  SHMOE_CXX_BOTH(void, shmem_iput, N##_iput,                                                      \
                 (T * d, const T* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe),             \
                 (d, s, dst, sst, n, pe))                                                         \
  SHMOE_CXX_BOTH(void, shmem_iget, N##_iget,                                                      \
                 (T * d, const T* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe),             \
                 (d, s, dst, sst, n, pe))                                                         \
  SHMOE_CXX_BOTH(void, shmem_p, N##_p, (T * d, T v, int pe), (d, v, pe))                          \
  SHMOE_CXX_BOTH(T, shmem_g, N##_g, (const T* s, int pe), (s, pe))                                \
  SHMOE_CXX_BOTH(void, shmem_put_signal, N##_put_signal,                                          \
                 (T * d, const T* s, size_t n, uint64_t* sig, uint64_t v, int op, int pe),        \
                 (d, s, n, sig, v, op, pe))                                                       \
  SHMOE_CXX_BOTH(void, shmem_put_signal_nbi, N##_put_signal_nbi,                                  \
                 (T * d, const T* s, size_t n, uint64_t* sig, uint64_t v, int op, int pe),        \
                 (d, s, n, sig, v, op, pe))                                                       \
  SHMOE_CXX_ONE(int, shmem_broadcast, N##_broadcast,                                              \
                (shmem_team_t t, T * d, const T* s, size_t n, int root), (t, d, s, n, root))      \
  SHMOE_CXX_ONE(int, shmem_collect, N##_collect, (shmem_team_t t, T * d, const T* s, size_t n),   \
                (t, d, s, n))                                                                     \
  SHMOE_CXX_ONE(int, shmem_fcollect, N##_fcollect, (shmem_team_t t, T * d, const T* s, size_t n), \
                (t, d, s, n))                                                                     \
  SHMOE_CXX_ONE(int, shmem_alltoall, N##_alltoall, (shmem_team_t t, T * d, const T* s, size_t n), \
                (t, d, s, n))                                                                     \
  SHMOE_CXX_ONE(int, shmem_alltoalls, N##_alltoalls,                                              \
                (shmem_team_t t, T * d, const T* s, ptrdiff_t dst, ptrdiff_t sst, size_t n),      \
                (t, d, s, dst, sst, n))
SHMOE_GENERIC_RMA_TYPES(SHMOE_CXX_RMA)

#define SHMOE_CXX_AMO_EXTENDED(T, N)                                                              \
  SHMOE_CXX_BOTH(T, shmem_atomic_fetch, N##_atomic_fetch, (const T* s, int pe), (s, pe))          \
  SHMOE_CXX_BOTH(void, shmem_atomic_set, N##_atomic_set, (T * d, T v, int pe), (d, v, pe))        \
  SHMOE_CXX_BOTH(T, shmem_atomic_swap, N##_atomic_swap, (T * d, T v, int pe), (d, v, pe))         \
  SHMOE_CXX_BOTH(void, shmem_atomic_fetch_nbi, N##_atomic_fetch_nbi, (T * f, const T* s, int pe), \
                 (f, s, pe))                                                                      \
  SHMOE_CXX_BOTH(void, shmem_atomic_swap_nbi, N##_atomic_swap_nbi, (T * f, T * d, T v, int pe),   \
                 (f, d, v, pe))
SHMOE_GENERIC_AMO_EXTENDED_TYPES(SHMOE_CXX_AMO_EXTENDED)

#define SHMOE_CXX_AMO_STANDARD(T, N)                                                        \
  SHMOE_CXX_BOTH(T, shmem_atomic_compare_swap, N##_atomic_compare_swap,                     \
                 (T * d, T cond, T v, int pe), (d, cond, v, pe))                            \
  SHMOE_CXX_BOTH(T, shmem_atomic_fetch_inc, N##_atomic_fetch_inc, (T * d, int pe), (d, pe)) \
  SHMOE_CXX_BOTH(void, shmem_atomic_inc, N##_atomic_inc, (T * d, int pe), (d, pe))          \
  SHMOE_CXX_BOTH(T, shmem_atomic_fetch_add, N##_atomic_fetch_add, (T * d, T v, int pe),     \
                 (d, v, pe))                                                                \
  SHMOE_CXX_BOTH(void, shmem_atomic_add, N##_atomic_add, (T * d, T v, int pe), (d, v, pe))  \
  SHMOE_CXX_BOTH(void, shmem_atomic_compare_swap_nbi, N##_atomic_compare_swap_nbi,          \
                 (T * f, T * d, T cond, T v, int pe), (f, d, cond, v, pe))                  \
  SHMOE_CXX_BOTH(void, shmem_atomic_fetch_inc_nbi, N##_atomic_fetch_inc_nbi,                \
                 (T * f, T * d, int pe), (f, d, pe))                                        \
  SHMOE_CXX_BOTH(void, shmem_atomic_fetch_add_nbi, N##_atomic_fetch_add_nbi,                \
                 (T * f, T * d, T v, int pe), (f, d, v, pe))
SHMOE_GENERIC_INT_TYPES(SHMOE_CXX_AMO_STANDARD)

#define SHMOE_CXX_AMO_BITWISE_OP(T, N, OP)                                                   \
  SHMOE_CXX_BOTH(T, shmem_atomic_fetch_##OP, N##_atomic_fetch_##OP, (T * d, T v, int pe),    \
                 (d, v, pe))                                                                 \
  SHMOE_CXX_BOTH(void, shmem_atomic_##OP, N##_atomic_##OP, (T * d, T v, int pe), (d, v, pe)) \
  SHMOE_CXX_BOTH(void, shmem_atomic_fetch_##OP##_nbi, N##_atomic_fetch_##OP##_nbi,           \
                 (T * f, T * d, T v, int pe), (f, d, v, pe))
#define SHMOE_CXX_AMO_BITWISE(T, N)   \
  SHMOE_CXX_AMO_BITWISE_OP(T, N, and) \
  SHMOE_CXX_AMO_BITWISE_OP(T, N, or)  \
  SHMOE_CXX_AMO_BITWISE_OP(T, N, xor)
SHMOE_GENERIC_BITWISE_TYPES(SHMOE_CXX_AMO_BITWISE)

#define SHMOE_CXX_P2P(T, N)                                                                       \
  SHMOE_CXX_ONE(void, shmem_wait_until, N##_wait_until, (T * ivar, int cmp, T v), (ivar, cmp, v)) \
  SHMOE_CXX_ONE(void, shmem_wait_until_all, N##_wait_until_all,                                   \
                (T * ivars, size_t n, const int* st, int cmp, T v), (ivars, n, st, cmp, v))       \
  SHMOE_CXX_ONE(size_t, shmem_wait_until_any, N##_wait_until_any,                                 \
                (T * ivars, size_t n, const int* st, int cmp, T v), (ivars, n, st, cmp, v))       \
  SHMOE_CXX_ONE(size_t, shmem_wait_until_some, N##_wait_until_some,                               \
                (T * ivars, size_t n, size_t * idx, const int* st, int cmp, T v),                 \
                (ivars, n, idx, st, cmp, v))                                                      \
  SHMOE_CXX_ONE(void, shmem_wait_until_all_vector, N##_wait_until_all_vector,                     \
                (T * ivars, size_t n, const int* st, int cmp, T* v), (ivars, n, st, cmp, v))      \
  SHMOE_CXX_ONE(size_t, shmem_wait_until_any_vector, N##_wait_until_any_vector,                   \
                (T * ivars, size_t n, const int* st, int cmp, T* v), (ivars, n, st, cmp, v))      \
  SHMOE_CXX_ONE(size_t, shmem_wait_until_some_vector, N##_wait_until_some_vector,                 \
                (T * ivars, size_t n, size_t * idx, const int* st, int cmp, T* v),                \
                (ivars, n, idx, st, cmp, v))                                                      \
  SHMOE_CXX_ONE(int, shmem_test, N##_test, (T * ivar, int cmp, T v), (ivar, cmp, v))              \
  SHMOE_CXX_ONE(int, shmem_test_all, N##_test_all,                                                \
                (T * ivars, size_t n, const int* st, int cmp, T v), (ivars, n, st, cmp, v))       \
  SHMOE_CXX_ONE(size_t, shmem_test_any, N##_test_any,                                             \
                (T * ivars, size_t n, const int* st, int cmp, T v), (ivars, n, st, cmp, v))       \
  SHMOE_CXX_ONE(size_t, shmem_test_some, N##_test_some,                                           \
                (T * ivars, size_t n, size_t * idx, const int* st, int cmp, T v),                 \
                (ivars, n, idx, st, cmp, v))                                                      \
  SHMOE_CXX_ONE(int, shmem_test_all_vector, N##_test_all_vector,                                  \
                (T * ivars, size_t n, const int* st, int cmp, T* v), (ivars, n, st, cmp, v))      \
  SHMOE_CXX_ONE(size_t, shmem_test_any_vector, N##_test_any_vector,                               \
                (T * ivars, size_t n, const int* st, int cmp, T* v), (ivars, n, st, cmp, v))      \
  SHMOE_CXX_ONE(size_t, shmem_test_some_vector, N##_test_some_vector,                             \
                (T * ivars, size_t n, size_t * idx, const int* st, int cmp, T* v),                \
                (ivars, n, idx, st, cmp, v))
SHMOE_GENERIC_P2P_TYPES(SHMOE_CXX_P2P)

#define SHMOE_CXX_REDUCE(T, N, OP)                           \
  SHMOE_CXX_ONE(int, shmem_##OP##_reduce, N##_##OP##_reduce, \
                (shmem_team_t t, T * d, const T* s, size_t n), (t, d, s, n))
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
