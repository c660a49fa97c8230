// The point-to-point wait and test machinery (OpenSHMEM 1.5 section 9.10), shared by the
// current routines and the deprecated ones. Every wait reads its words with acquire loads (the
// writer's data-then-flag order is then seen by this PE) and waits through shmoe::wait_until,
// which backs off and reports hangs.
#pragma once

#include <atomic>
#include <climits>
#include <cstdint>
#include <string>

#include "common/backoff.hpp"
#include "shmem/api_stamp.hpp"

namespace shmoe::api {

inline const char* cmp_name(int cmp) {
  switch (cmp) {
    case SHMEM_CMP_EQ:
      return "EQ";
    case SHMEM_CMP_NE:
      return "NE";
    case SHMEM_CMP_GT:
      return "GT";
    case SHMEM_CMP_GE:
      return "GE";
    case SHMEM_CMP_LT:
      return "LT";
    case SHMEM_CMP_LE:
      return "LE";
  }
  return nullptr;
}

inline void check_cmp(int cmp, const char* fn) {
  if (cmp_name(cmp) == nullptr) {
    shmoe::api_error(fn, "cmp={} is not a comparison (SHMEM_CMP_EQ={} .. SHMEM_CMP_LE={})", cmp,
                     SHMEM_CMP_EQ, SHMEM_CMP_LE);
  }
}

// The words a wait or test reads: NULL is refused by name (reading it would crash the PE) unless
// the call reads no element.
inline void check_ivars(const void* ivars, std::size_t n, const char* fn) {
  if (ivars == nullptr && n > 0) {
    shmoe::api_error(fn,
                     "ivars=NULL, but the call reads {} element{}: pass the address of a "
                     "symmetric data object",
                     n, n == 1 ? "" : "s");
  }
}

template <typename T>
bool compare(T a, int cmp, T b) {
  switch (cmp) {
    case SHMEM_CMP_EQ:
      return a == b;
    case SHMEM_CMP_NE:
      return a != b;
    case SHMEM_CMP_GT:
      return a > b;
    case SHMEM_CMP_GE:
      return a >= b;
    case SHMEM_CMP_LT:
      return a < b;
    case SHMEM_CMP_LE:
      return a <= b;
  }
  return false;
}

template <typename T>
T load(T* ivar) {
  return std::atomic_ref<T>(*ivar).load(std::memory_order_acquire);
}

// The comparison value of element i: one for all (scalar forms) or one each (vector forms).
template <typename T>
struct Scalar {
  T value;
  T operator[](std::size_t) const { return value; }
};

inline bool included(const int* status, std::size_t i) {
  return status == nullptr || status[i] == 0;
}

template <typename T, typename Values>
bool test_all(T* ivars, std::size_t n, const int* status, int cmp, const Values& v) {
  for (std::size_t i = 0; i < n; ++i) {
    if (included(status, i) && !compare(load(ivars + i), cmp, v[i])) return false;
  }
  return true;
}

// Where the _any routines start looking: one past the index this thread's last _any call
// returned. Of several satisfied elements, a series of calls then returns each in turn, as
// OpenSHMEM 1.5 requires ("a series of calls ... must eventually return i" for every satisfied
// i); always starting at 0 would return the lowest one forever.
class AnyScan {
 public:
  static std::size_t start(std::size_t n) { return n == 0 ? 0 : next_ % n; }
  static std::size_t found(std::size_t i) {
    if (i != SIZE_MAX) next_ = i + 1;
    return i;
  }

 private:
  static inline thread_local std::size_t next_ = 0;
};

template <typename T, typename Values>
std::size_t test_any(T* ivars, std::size_t n, const int* status, int cmp, const Values& v,
                     std::size_t start) {
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (start + k) % n;
    if (included(status, i) && compare(load(ivars + i), cmp, v[i])) return i;
  }
  return SIZE_MAX;
}

template <typename T, typename Values>
std::size_t test_some(T* ivars, std::size_t n, std::size_t* indices, const int* status, int cmp,
                      const Values& v) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (included(status, i) && compare(load(ivars + i), cmp, v[i])) indices[count++] = i;
  }
  return count;
}

inline bool any_included(std::size_t n, const int* status) {
  for (std::size_t i = 0; i < n; ++i) {
    if (included(status, i)) return true;
  }
  return false;
}

// What a hung wait reports: the call, where the word lives and what it holds. Any PE may put
// to the word, so there is no peer to name; expected and seen are those of the first element.
template <typename T, typename Values>
shmoe::WaitState describe(const char* fn, T* ivars, std::size_t n, const int* status, int cmp,
                          const Values& v) {
  auto* rt = shmoe::runtime_or_null();
  std::string where = rt != nullptr && rt->is_symmetric(ivars, sizeof(T))
                          ? fmt::format("symmetric offset {:#x}", rt->offset_of(ivars))
                          : fmt::format("address {}", static_cast<const void*>(ivars));
  std::string seen;
  std::size_t shown = 0;
  shmoe::WaitState state{fn, "", -1, 0, 0, 0};
  for (std::size_t i = 0; i < n && shown < 8; ++i) {
    if (!included(status, i)) continue;
    const T now = load(ivars + i);
    if (shown == 0) {
      state.expected = static_cast<std::uint64_t>(v[i]);
      state.seen = static_cast<std::uint64_t>(now);
    }
    seen += fmt::format("[{}]={} (want {} {}) ", i, now, cmp_name(cmp), v[i]);
    ++shown;
  }
  state.detail = fmt::format(
      "{} on {} ({} elements): {}; the value is written by whichever PE puts to "
      "it",
      fn, where, n, seen);
  return state;
}

template <typename T, typename Values>
void wait_all(const char* fn, T* ivars, std::size_t n, const int* status, int cmp,
              const Values& v) {
  check_cmp(cmp, fn);
  check_ivars(ivars, n, fn);
  shmoe::wait_until([&] { return test_all(ivars, n, status, cmp, v); },
                    [&] { return describe(fn, ivars, n, status, cmp, v); });
}

template <typename T, typename Values>
std::size_t wait_any(const char* fn, T* ivars, std::size_t n, const int* status, int cmp,
                     const Values& v) {
  check_cmp(cmp, fn);
  check_ivars(ivars, n, fn);
  if (!any_included(n, status)) return SIZE_MAX;
  const std::size_t start = AnyScan::start(n);
  std::size_t found = SIZE_MAX;
  shmoe::wait_until([&] { return (found = test_any(ivars, n, status, cmp, v, start)) != SIZE_MAX; },
                    [&] { return describe(fn, ivars, n, status, cmp, v); });
  return AnyScan::found(found);
}

template <typename T, typename Values>
std::size_t wait_some(const char* fn, T* ivars, std::size_t n, std::size_t* indices,
                      const int* status, int cmp, const Values& v) {
  check_cmp(cmp, fn);
  check_ivars(ivars, n, fn);
  if (!any_included(n, status)) return 0;
  std::size_t count = 0;
  shmoe::wait_until([&] { return (count = test_some(ivars, n, indices, status, cmp, v)) > 0; },
                    [&] { return describe(fn, ivars, n, status, cmp, v); });
  return count;
}

// The test routines drive the transport once, as a wait does at every look: a program that
// polls with shmem_test must see peers' operations land (over UCX they need this PE's worker).
template <typename T>
int test_one(const char* fn, T* ivar, int cmp, T value) {
  check_cmp(cmp, fn);
  check_ivars(ivar, 1, fn);
  shmoe::run_wait_progress();
  return compare(load(ivar), cmp, value) ? 1 : 0;
}

}  // namespace shmoe::api
