// Atomic memory operations and point-to-point waits on one element, stamped from the
// specification's type tables: the Python function atomic_OP_TYPENAME exists exactly where
// shmem_TYPENAME_atomic_OP does, and the package finds the operations an element type supports
// by looking for those names. The element is (array, byte offset).
#include <shmem.h>

#include <string>

#include "bindings.hpp"
#include "shmoe/type_tables.h"

namespace shmoe::python {
namespace {

std::string name_of(const char* op, const char* type) {
  return std::string(op) + "_" + type;
}

template <typename T>
T* elem(const py::buffer& a, std::size_t offset) {
  return reinterpret_cast<T*>(element_of(a, offset, sizeof(T), true));
}

#define SHMOE_PY_AMO_EXTENDED(T, N)                                                            \
  m.def(name_of("atomic_fetch", #N).c_str(), [](const py::buffer& a, std::size_t at, int pe) { \
    T* p = elem<T>(a, at);                                                                     \
    return released([&] { return shmem_##N##_atomic_fetch(p, pe); });                          \
  });                                                                                          \
  m.def(name_of("atomic_set", #N).c_str(),                                                     \
        [](const py::buffer& a, std::size_t at, T value, int pe) {                             \
          T* p = elem<T>(a, at);                                                               \
          released([&] { shmem_##N##_atomic_set(p, value, pe); });                             \
        });                                                                                    \
  m.def(name_of("atomic_swap", #N).c_str(),                                                    \
        [](const py::buffer& a, std::size_t at, T value, int pe) {                             \
          T* p = elem<T>(a, at);                                                               \
          return released([&] { return shmem_##N##_atomic_swap(p, value, pe); });              \
        });

#define SHMOE_PY_AMO_STANDARD(T, N)                                                                \
  m.def(name_of("atomic_compare_swap", #N).c_str(),                                                \
        [](const py::buffer& a, std::size_t at, T cond, T value, int pe) {                         \
          T* p = elem<T>(a, at);                                                                   \
          return released([&] { return shmem_##N##_atomic_compare_swap(p, cond, value, pe); });    \
        });                                                                                        \
  m.def(name_of("atomic_fetch_inc", #N).c_str(), [](const py::buffer& a, std::size_t at, int pe) { \
    T* p = elem<T>(a, at);                                                                         \
    return released([&] { return shmem_##N##_atomic_fetch_inc(p, pe); });                          \
  });                                                                                              \
  m.def(name_of("atomic_inc", #N).c_str(), [](const py::buffer& a, std::size_t at, int pe) {       \
    T* p = elem<T>(a, at);                                                                         \
    released([&] { shmem_##N##_atomic_inc(p, pe); });                                              \
  });                                                                                              \
  m.def(name_of("atomic_fetch_add", #N).c_str(),                                                   \
        [](const py::buffer& a, std::size_t at, T value, int pe) {                                 \
          T* p = elem<T>(a, at);                                                                   \
          return released([&] { return shmem_##N##_atomic_fetch_add(p, value, pe); });             \
        });                                                                                        \
  m.def(name_of("atomic_add", #N).c_str(),                                                         \
        [](const py::buffer& a, std::size_t at, T value, int pe) {                                 \
          T* p = elem<T>(a, at);                                                                   \
          released([&] { shmem_##N##_atomic_add(p, value, pe); });                                 \
        });

#define SHMOE_PY_AMO_BITWISE_OP(T, N, OP)                                               \
  m.def(name_of("atomic_fetch_" #OP, #N).c_str(),                                       \
        [](const py::buffer& a, std::size_t at, T value, int pe) {                      \
          T* p = elem<T>(a, at);                                                        \
          return released([&] { return shmem_##N##_atomic_fetch_##OP(p, value, pe); }); \
        });                                                                             \
  m.def(name_of("atomic_" #OP, #N).c_str(),                                             \
        [](const py::buffer& a, std::size_t at, T value, int pe) {                      \
          T* p = elem<T>(a, at);                                                        \
          released([&] { shmem_##N##_atomic_##OP(p, value, pe); });                     \
        });
#define SHMOE_PY_AMO_BITWISE(T, N)   \
  SHMOE_PY_AMO_BITWISE_OP(T, N, and) \
  SHMOE_PY_AMO_BITWISE_OP(T, N, or)  \
  SHMOE_PY_AMO_BITWISE_OP(T, N, xor)

#define SHMOE_PY_P2P(T, N)                                                                       \
  m.def(name_of("wait_until", #N).c_str(),                                                       \
        [](const py::buffer& a, std::size_t at, int cmp, T value) {                              \
          T* p = elem<T>(a, at);                                                                 \
          released([&] { shmem_##N##_wait_until(p, cmp, value); });                              \
        });                                                                                      \
  m.def(name_of("test", #N).c_str(), [](const py::buffer& a, std::size_t at, int cmp, T value) { \
    T* p = elem<T>(a, at);                                                                       \
    return released([&] { return shmem_##N##_test(p, cmp, value) != 0; });                       \
  });

}  // namespace

void bind_amo(py::module_& m) {
  SHMOE_AMO_EXTENDED_TYPES(SHMOE_PY_AMO_EXTENDED)
  SHMOE_AMO_STANDARD_TYPES(SHMOE_PY_AMO_STANDARD)
  SHMOE_AMO_BITWISE_TYPES(SHMOE_PY_AMO_BITWISE)
  SHMOE_P2P_SYNC_TYPES(SHMOE_PY_P2P)
}

}  // namespace shmoe::python
