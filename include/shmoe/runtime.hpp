// shmoe's own calls beside OpenSHMEM's (shmoe/runtime.h), for C++: the agreement that makes a
// collective call refuse on every PE or on none, and the heap's live allocations. Header-only,
// so the library's binary interface stays the C one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "shmoe/runtime.h"

namespace shmoe {

// shmoe's one error type in C++ (Python's shmoe.Error): a call of the C API that failed, with
// its status and what() its last-error text. A collective call refused on every PE says why on
// every PE (the refusing PE's reason, or which PE refused and its reason, or which values the PEs
// disagree on); status() is then -1 (SHMOE_MOE_REFUSED for the MoE calls).
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, int status = -1)
      : std::runtime_error(what), status_(status) {}
  int status() const noexcept { return status_; }

 private:
  int status_;
};

// One value every member of the team must pass alike, and the name a message gives it.
struct AgreedValue {
  const char* name;
  std::int64_t value;
};

// Collective over `team`: returns when no member refuses `call` (refusal: this PE's reason, or
// empty) and every member passed the same `values`; throws Error on every member otherwise.
inline void agree(shmem_team_t team, const char* call, const std::string& refusal,
                  std::initializer_list<AgreedValue> values = {}) {
  if (values.size() > SHMOE_AGREE_MAX_VALUES) {
    throw std::invalid_argument(std::string(call) + ": shmoe::agree takes at most " +
                                std::to_string(SHMOE_AGREE_MAX_VALUES) + " values");
  }
  std::int64_t v[SHMOE_AGREE_MAX_VALUES] = {};
  const char* names[SHMOE_AGREE_MAX_VALUES] = {};
  int n = 0;
  for (const AgreedValue& a : values) {
    names[n] = a.name;
    v[n++] = a.value;
  }
  if (shmoe_agree(team, call, refusal.empty() ? nullptr : refusal.c_str(), v, names, n) != 0) {
    throw Error(shmoe_last_error());
  }
}

// The live allocation of this PE's symmetric heap that holds [p, p + bytes), if any.
struct HeapAllocation {
  void* start;
  std::size_t size;
};
inline std::optional<HeapAllocation> heap_allocation(const void* p, std::size_t bytes) {
  HeapAllocation a{};
  if (shmoe_heap_allocation(p, bytes, &a.start, &a.size) == 0) return std::nullopt;
  return a;
}

}  // namespace shmoe
