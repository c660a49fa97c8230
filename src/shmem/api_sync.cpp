// Point-to-point synchronization (OpenSHMEM 1.5 section 9.10), stamped for every P2P type, and
// the whole-job barriers.
#include "shmem/p2p_sync.hpp"

using namespace shmoe::api;

namespace shmoe::api {
// Shared with the signal routines, which wait on uint64_t words the same way.
std::uint64_t wait_until_u64(const char* fn, std::uint64_t* ivar, int cmp, std::uint64_t value) {
  wait_all(fn, ivar, 1, nullptr, cmp, Scalar<std::uint64_t>{value});
  return load(ivar);
}
}  // namespace shmoe::api

extern "C" {

#define SHMOE_DEF_P2P_SYNC(T, N)                                                                   \
  void pshmem_##N##_wait_until(T* ivar, int cmp, T cmp_value) {                                    \
    wait_all("shmem_" #N "_wait_until", ivar, 1, nullptr, cmp, Scalar<T>{cmp_value});              \
  }                                                                                                \
  void pshmem_##N##_wait_until_all(T* ivars, size_t nelems, const int* status, int cmp,            \
                                   T cmp_value) {                                                  \
    wait_all("shmem_" #N "_wait_until_all", ivars, nelems, status, cmp, Scalar<T>{cmp_value});     \
  }                                                                                                \
  size_t pshmem_##N##_wait_until_any(T* ivars, size_t nelems, const int* status, int cmp,          \
                                     T cmp_value) {                                                \
    return wait_any("shmem_" #N "_wait_until_any", ivars, nelems, status, cmp,                     \
                    Scalar<T>{cmp_value});                                                         \
  }                                                                                                \
  size_t pshmem_##N##_wait_until_some(T* ivars, size_t nelems, size_t* indices, const int* status, \
                                      int cmp, T cmp_value) {                                      \
    return wait_some("shmem_" #N "_wait_until_some", ivars, nelems, indices, status, cmp,          \
                     Scalar<T>{cmp_value});                                                        \
  }                                                                                                \
  void pshmem_##N##_wait_until_all_vector(T* ivars, size_t nelems, const int* status, int cmp,     \
                                          const T* cmp_values) {                                   \
    wait_all("shmem_" #N "_wait_until_all_vector", ivars, nelems, status, cmp, cmp_values);        \
  }                                                                                                \
  size_t pshmem_##N##_wait_until_any_vector(T* ivars, size_t nelems, const int* status, int cmp,   \
                                            const T* cmp_values) {                                 \
    return wait_any("shmem_" #N "_wait_until_any_vector", ivars, nelems, status, cmp, cmp_values); \
  }                                                                                                \
  size_t pshmem_##N##_wait_until_some_vector(T* ivars, size_t nelems, size_t* indices,             \
                                             const int* status, int cmp, const T* cmp_values) {    \
    return wait_some("shmem_" #N "_wait_until_some_vector", ivars, nelems, indices, status, cmp,   \
                     cmp_values);                                                                  \
  }                                                                                                \
  int pshmem_##N##_test(T* ivar, int cmp, T cmp_value) {                                           \
    return test_one("shmem_" #N "_test", ivar, cmp, cmp_value);                                    \
  }                                                                                                \
  int pshmem_##N##_test_all(T* ivars, size_t nelems, const int* status, int cmp, T cmp_value) {    \
    check_cmp(cmp, "shmem_" #N "_test_all");                                                       \
    check_ivars(ivars, nelems, "shmem_" #N "_test_all");                                           \
    shmoe::run_wait_progress();                                                                    \
    return test_all(ivars, nelems, status, cmp, Scalar<T>{cmp_value}) ? 1 : 0;                     \
  }                                                                                                \
  size_t pshmem_##N##_test_any(T* ivars, size_t nelems, const int* status, int cmp, T cmp_value) { \
    check_cmp(cmp, "shmem_" #N "_test_any");                                                       \
    check_ivars(ivars, nelems, "shmem_" #N "_test_any");                                           \
    shmoe::run_wait_progress();                                                                    \
    return AnyScan::found(                                                                         \
        test_any(ivars, nelems, status, cmp, Scalar<T>{cmp_value}, AnyScan::start(nelems)));       \
  }                                                                                                \
  size_t pshmem_##N##_test_some(T* ivars, size_t nelems, size_t* indices, const int* status,       \
                                int cmp, T cmp_value) {                                            \
    check_cmp(cmp, "shmem_" #N "_test_some");                                                      \
    check_ivars(ivars, nelems, "shmem_" #N "_test_some");                                          \
    shmoe::run_wait_progress();                                                                    \
    return test_some(ivars, nelems, indices, status, cmp, Scalar<T>{cmp_value});                   \
  }                                                                                                \
  int pshmem_##N##_test_all_vector(T* ivars, size_t nelems, const int* status, int cmp,            \
                                   const T* cmp_values) {                                          \
    check_cmp(cmp, "shmem_" #N "_test_all_vector");                                                \
    check_ivars(ivars, nelems, "shmem_" #N "_test_all_vector");                                    \
    shmoe::run_wait_progress();                                                                    \
    return test_all(ivars, nelems, status, cmp, cmp_values) ? 1 : 0;                               \
  }                                                                                                \
  size_t pshmem_##N##_test_any_vector(T* ivars, size_t nelems, const int* status, int cmp,         \
                                      const T* cmp_values) {                                       \
    check_cmp(cmp, "shmem_" #N "_test_any_vector");                                                \
    check_ivars(ivars, nelems, "shmem_" #N "_test_any_vector");                                    \
    shmoe::run_wait_progress();                                                                    \
    return AnyScan::found(                                                                         \
        test_any(ivars, nelems, status, cmp, cmp_values, AnyScan::start(nelems)));                 \
  }                                                                                                \
  size_t pshmem_##N##_test_some_vector(T* ivars, size_t nelems, size_t* indices,                   \
                                       const int* status, int cmp, const T* cmp_values) {          \
    check_cmp(cmp, "shmem_" #N "_test_some_vector");                                               \
    check_ivars(ivars, nelems, "shmem_" #N "_test_some_vector");                                   \
    shmoe::run_wait_progress();                                                                    \
    return test_some(ivars, nelems, indices, status, cmp, cmp_values);                             \
  }                                                                                                \
  SHMOE_WEAK_ALIAS(shmem_##N##_wait_until)                                                         \
  SHMOE_WEAK_ALIAS(shmem_##N##_wait_until_all)                                                     \
  SHMOE_WEAK_ALIAS(shmem_##N##_wait_until_any)                                                     \
  SHMOE_WEAK_ALIAS(shmem_##N##_wait_until_some)                                                    \
  SHMOE_WEAK_ALIAS(shmem_##N##_wait_until_all_vector)                                              \
  SHMOE_WEAK_ALIAS(shmem_##N##_wait_until_any_vector)                                              \
  SHMOE_WEAK_ALIAS(shmem_##N##_wait_until_some_vector)                                             \
  SHMOE_WEAK_ALIAS(shmem_##N##_test)                                                               \
  SHMOE_WEAK_ALIAS(shmem_##N##_test_all)                                                           \
  SHMOE_WEAK_ALIAS(shmem_##N##_test_any)                                                           \
  SHMOE_WEAK_ALIAS(shmem_##N##_test_some)                                                          \
  SHMOE_WEAK_ALIAS(shmem_##N##_test_all_vector)                                                    \
  SHMOE_WEAK_ALIAS(shmem_##N##_test_any_vector)                                                    \
  SHMOE_WEAK_ALIAS(shmem_##N##_test_some_vector)
SHMOE_P2P_SYNC_TYPES(SHMOE_DEF_P2P_SYNC)

void pshmem_barrier_all(void) {
  shmoe::runtime("shmem_barrier_all").barrier_all();
}
void pshmem_sync_all(void) {
  shmoe::runtime("shmem_sync_all").sync_all();
}
SHMOE_WEAK_ALIAS(shmem_barrier_all)
SHMOE_WEAK_ALIAS(shmem_sync_all)

}  // extern "C"
