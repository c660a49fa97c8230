// Deprecated names that older OpenSHMEM programs still use (OpenSHMEM 1.5 Annex F), each a thin
// alias of its current form, and the cache routines, which have nothing to do on coherent
// shared memory.
//
// This file defines the C symbol shmem_wait_until(long*, int, long) of before C11, which the C++
// overload of the same signature in shmoe/generic.h would clash with: the overloads stay out, and
// shmem.h and pshmem.h declare it here as they do for C.
#define SHMOE_NO_CXX_OVERLOADS
#include "shmem/p2p_sync.hpp"

namespace {

// shmem_TYPE_wait waits until the value differs, like the current routines wait.
template <typename T>
void wait_cmp(const char* fn, T* ivar, int cmp, T value) {
  shmoe::api::wait_all(fn, ivar, 1, nullptr, cmp, shmoe::api::Scalar<T>{value});
}

}  // namespace

extern "C" {

void pstart_pes(int npes) {
  (void)npes;  // the job size comes from the launcher, as it always has
  pshmem_init();
}
int p_my_pe(void) {
  return pshmem_my_pe();
}
int p_num_pes(void) {
  return pshmem_n_pes();
}
void* pshmalloc(size_t size) {
  return pshmem_malloc(size);
}
void pshfree(void* ptr) {
  pshmem_free(ptr);
}
void* pshrealloc(void* ptr, size_t size) {
  return pshmem_realloc(ptr, size);
}
void* pshmemalign(size_t alignment, size_t size) {
  return pshmem_align(alignment, size);
}
SHMOE_WEAK_ALIAS(start_pes)
SHMOE_WEAK_ALIAS(_my_pe)
SHMOE_WEAK_ALIAS(_num_pes)
SHMOE_WEAK_ALIAS(shmalloc)
SHMOE_WEAK_ALIAS(shfree)
SHMOE_WEAK_ALIAS(shrealloc)
SHMOE_WEAK_ALIAS(shmemalign)

#define SHMOE_DEF_AMO_OLD(T, N)                                     \
  T pshmem_##N##_cswap(T* dest, T cond, T value, int pe) {          \
    return pshmem_##N##_atomic_compare_swap(dest, cond, value, pe); \
  }                                                                 \
  T pshmem_##N##_fadd(T* dest, T value, int pe) {                   \
    return pshmem_##N##_atomic_fetch_add(dest, value, pe);          \
  }                                                                 \
  T pshmem_##N##_finc(T* dest, int pe) {                            \
    return pshmem_##N##_atomic_fetch_inc(dest, pe);                 \
  }                                                                 \
  void pshmem_##N##_add(T* dest, T value, int pe) {                 \
    pshmem_##N##_atomic_add(dest, value, pe);                       \
  }                                                                 \
  void pshmem_##N##_inc(T* dest, int pe) {                          \
    pshmem_##N##_atomic_inc(dest, pe);                              \
  }                                                                 \
  SHMOE_WEAK_ALIAS(shmem_##N##_cswap)                               \
  SHMOE_WEAK_ALIAS(shmem_##N##_fadd)                                \
  SHMOE_WEAK_ALIAS(shmem_##N##_finc)                                \
  SHMOE_WEAK_ALIAS(shmem_##N##_add)                                 \
  SHMOE_WEAK_ALIAS(shmem_##N##_inc)
SHMOE_DEPRECATED_AMO_TYPES(SHMOE_DEF_AMO_OLD)

#define SHMOE_DEF_AMO_OLD_EXTENDED(T, N)              \
  T pshmem_##N##_swap(T* dest, T value, int pe) {     \
    return pshmem_##N##_atomic_swap(dest, value, pe); \
  }                                                   \
  T pshmem_##N##_fetch(const T* source, int pe) {     \
    return pshmem_##N##_atomic_fetch(source, pe);     \
  }                                                   \
  void pshmem_##N##_set(T* dest, T value, int pe) {   \
    pshmem_##N##_atomic_set(dest, value, pe);         \
  }                                                   \
  SHMOE_WEAK_ALIAS(shmem_##N##_swap)                  \
  SHMOE_WEAK_ALIAS(shmem_##N##_fetch)                 \
  SHMOE_WEAK_ALIAS(shmem_##N##_set)
SHMOE_DEPRECATED_AMO_EXTENDED_TYPES(SHMOE_DEF_AMO_OLD_EXTENDED)

long pshmem_swap(long* dest, long value, int pe) {
  return pshmem_long_atomic_swap(dest, value, pe);
}
SHMOE_WEAK_ALIAS(shmem_swap)

#define SHMOE_DEF_WAIT_OLD(T, N)                                  \
  void pshmem_##N##_wait(T* ivar, T cmp_value) {                  \
    wait_cmp("shmem_" #N "_wait", ivar, SHMEM_CMP_NE, cmp_value); \
  }                                                               \
  SHMOE_WEAK_ALIAS(shmem_##N##_wait)
SHMOE_DEPRECATED_WAIT_TYPES(SHMOE_DEF_WAIT_OLD)

void pshmem_wait(long* ivar, long cmp_value) {
  wait_cmp("shmem_wait", ivar, SHMEM_CMP_NE, cmp_value);
}
void pshmem_wait_until(long* ivar, int cmp, long cmp_value) {
  wait_cmp("shmem_wait_until", ivar, cmp, cmp_value);
}
SHMOE_WEAK_ALIAS(shmem_wait)
SHMOE_WEAK_ALIAS(shmem_wait_until)

void pshmem_clear_cache_inv(void) {}
void pshmem_set_cache_inv(void) {}
void pshmem_clear_cache_line_inv(void* dest) {
  (void)dest;
}
void pshmem_set_cache_line_inv(void* dest) {
  (void)dest;
}
void pshmem_udcflush(void) {}
void pshmem_udcflush_line(void* dest) {
  (void)dest;
}
SHMOE_WEAK_ALIAS(shmem_clear_cache_inv)
SHMOE_WEAK_ALIAS(shmem_set_cache_inv)
SHMOE_WEAK_ALIAS(shmem_clear_cache_line_inv)
SHMOE_WEAK_ALIAS(shmem_set_cache_line_inv)
SHMOE_WEAK_ALIAS(shmem_udcflush)
SHMOE_WEAK_ALIAS(shmem_udcflush_line)

}  // extern "C"
