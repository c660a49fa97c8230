// Atomic memory operations and point-to-point waits on one element, stamped from the
// specification's type tables: the Python function atomic_OP_TYPENAME exists exactly where
// shmem_TYPENAME_atomic_OP does, and the package finds the operations an element type supports
// by looking for those names.
#include <shmem.h>

#include <string>

#include "bindings.hpp"

namespace shmoe::python {
namespace {

std::string name_of(const char* op, const char* type) {
  return std::string(op) + "_" + type;
}

#define SHMOE_PY_AMO_EXTENDED(T, N)                                                     \
  m.def(name_of("atomic_fetch", #N).c_str(), [](Address source, int pe) {               \
    return released([&] { return shmem_##N##_atomic_fetch(at<const T>(source), pe); }); \
  });                                                                                   \
  m.def(name_of("atomic_set", #N).c_str(), [](Address dest, T value, int pe) {          \
    released([&] { shmem_##N##_atomic_set(at<T>(dest), value, pe); });                  \
  });                                                                                   \
  m.def(name_of("atomic_swap", #N).c_str(), [](Address dest, T value, int pe) {         \
    return released([&] { return shmem_##N##_atomic_swap(at<T>(dest), value, pe); });   \
  });

#define SHMOE_PY_AMO_STANDARD(T, N)                                                                \
  m.def(name_of("atomic_compare_swap", #N).c_str(), [](Address dest, T cond, T value, int pe) {    \
    return released(                                                                               \
        [&] { return shmem_##N##_atomic_compare_swap(at<T>(dest), cond, value, pe); });            \
  });                                                                                              \
  m.def(name_of("atomic_fetch_inc", #N).c_str(), [](Address dest, int pe) {                        \
    return released([&] { return shmem_##N##_atomic_fetch_inc(at<T>(dest), pe); });                \
  });                                                                                              \
  m.def(name_of("atomic_inc", #N).c_str(),                                                         \
        [](Address dest, int pe) { released([&] { shmem_##N##_atomic_inc(at<T>(dest), pe); }); }); \
  m.def(name_of("atomic_fetch_add", #N).c_str(), [](Address dest, T value, int pe) {               \
    return released([&] { return shmem_##N##_atomic_fetch_add(at<T>(dest), value, pe); });         \
  });                                                                                              \
  m.def(name_of("atomic_add", #N).c_str(), [](Address dest, T value, int pe) {                     \
    released([&] { shmem_##N##_atomic_add(at<T>(dest), value, pe); });                             \
  });

#define SHMOE_PY_AMO_BITWISE_OP(T, N, OP)                                                   \
  m.def(name_of("atomic_fetch_" #OP, #N).c_str(), [](Address dest, T value, int pe) {       \
    return released([&] { return shmem_##N##_atomic_fetch_##OP(at<T>(dest), value, pe); }); \
  });                                                                                       \
  m.def(name_of("atomic_" #OP, #N).c_str(), [](Address dest, T value, int pe) {             \
    released([&] { shmem_##N##_atomic_##OP(at<T>(dest), value, pe); });                     \
  });
#define SHMOE_PY_AMO_BITWISE(T, N)   \
  SHMOE_PY_AMO_BITWISE_OP(T, N, and) \
  SHMOE_PY_AMO_BITWISE_OP(T, N, or)  \
  SHMOE_PY_AMO_BITWISE_OP(T, N, xor)

#define SHMOE_PY_P2P(T, N)                                                           \
  m.def(name_of("wait_until", #N).c_str(), [](Address ivar, int cmp, T value) {      \
    released([&] { shmem_##N##_wait_until(at<T>(ivar), cmp, value); });              \
  });                                                                                \
  m.def(name_of("test", #N).c_str(), [](Address ivar, int cmp, T value) {            \
    return released([&] { return shmem_##N##_test(at<T>(ivar), cmp, value) != 0; }); \
  });

}  // namespace

void bind_amo(py::module_& m) {
  SHMOE_AMO_EXTENDED_TYPES(SHMOE_PY_AMO_EXTENDED)
  SHMOE_AMO_STANDARD_TYPES(SHMOE_PY_AMO_STANDARD)
  SHMOE_AMO_BITWISE_TYPES(SHMOE_PY_AMO_BITWISE)
  SHMOE_P2P_SYNC_TYPES(SHMOE_PY_P2P)
}

}  // namespace shmoe::python
