// Deprecated names that older OpenSHMEM programs still use (OpenSHMEM 1.5 Annex F), each a thin
// alias of its current form, and the cache routines, which have nothing to do on coherent
// shared memory.
#include "shmem/p2p_sync.hpp"

namespace {

// shmem_TYPE_wait (until the value differs) and shmem_short_wait_until (short has no current
// wait routine) wait like the current routines do.
template <typename T>
void wait_cmp(const char* fn, T* ivar, int cmp, T value) {
  shmoe::api::wait_all(fn, ivar, 1, nullptr, cmp, shmoe::api::Scalar<T>{value});
}

}  // namespace

extern "C" {

void start_pes(int npes) {
  (void)npes;  // the job size comes from the launcher, as it always has
  shmem_init();
}
int _my_pe(void) {
  return shmem_my_pe();
}
int _num_pes(void) {
  return shmem_n_pes();
}
void* shmalloc(size_t size) {
  return shmem_malloc(size);
}
void shfree(void* ptr) {
  shmem_free(ptr);
}
void* shrealloc(void* ptr, size_t size) {
  return shmem_realloc(ptr, size);
}
void* shmemalign(size_t alignment, size_t size) {
  return shmem_align(alignment, size);
}

#define SHMOE_DEF_AMO_OLD(T, N)                                    \
  T shmem_##N##_cswap(T* dest, T cond, T value, int pe) {          \
    return shmem_##N##_atomic_compare_swap(dest, cond, value, pe); \
  }                                                                \
  T shmem_##N##_fadd(T* dest, T value, int pe) {                   \
    return shmem_##N##_atomic_fetch_add(dest, value, pe);          \
  }                                                                \
  T shmem_##N##_finc(T* dest, int pe) {                            \
    return shmem_##N##_atomic_fetch_inc(dest, pe);                 \
  }                                                                \
  void shmem_##N##_add(T* dest, T value, int pe) {                 \
    shmem_##N##_atomic_add(dest, value, pe);                       \
  }                                                                \
  void shmem_##N##_inc(T* dest, int pe) {                          \
    shmem_##N##_atomic_inc(dest, pe);                              \
  }
SHMOE_DEPRECATED_AMO_TYPES(SHMOE_DEF_AMO_OLD)

#define SHMOE_DEF_AMO_OLD_EXTENDED(T, N)             \
  T shmem_##N##_swap(T* dest, T value, int pe) {     \
    return shmem_##N##_atomic_swap(dest, value, pe); \
  }                                                  \
  T shmem_##N##_fetch(const T* source, int pe) {     \
    return shmem_##N##_atomic_fetch(source, pe);     \
  }                                                  \
  void shmem_##N##_set(T* dest, T value, int pe) {   \
    shmem_##N##_atomic_set(dest, value, pe);         \
  }
SHMOE_DEPRECATED_AMO_EXTENDED_TYPES(SHMOE_DEF_AMO_OLD_EXTENDED)

long shmem_swap(long* dest, long value, int pe) {
  return shmem_long_atomic_swap(dest, value, pe);
}

#define SHMOE_DEF_WAIT_OLD(T, N)                                  \
  void shmem_##N##_wait(T* ivar, T cmp_value) {                   \
    wait_cmp("shmem_" #N "_wait", ivar, SHMEM_CMP_NE, cmp_value); \
  }
SHMOE_DEPRECATED_WAIT_TYPES(SHMOE_DEF_WAIT_OLD)

void shmem_wait(long* ivar, long cmp_value) {
  wait_cmp("shmem_wait", ivar, SHMEM_CMP_NE, cmp_value);
}
void shmem_short_wait_until(short* ivar, int cmp, short cmp_value) {
  wait_cmp("shmem_short_wait_until", ivar, cmp, cmp_value);
}

void shmem_clear_cache_inv(void) {}
void shmem_set_cache_inv(void) {}
void shmem_clear_cache_line_inv(void* dest) {
  (void)dest;
}
void shmem_set_cache_line_inv(void* dest) {
  (void)dest;
}
void shmem_udcflush(void) {}
void shmem_udcflush_line(void* dest) {
  (void)dest;
}

}  // extern "C"
