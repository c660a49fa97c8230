// The one agreement of collective calls (shmoe_agree in include/shmoe/runtime.h) on a team
// whose lock the caller holds: the library's own collectives use it to check, under SHMOE_DEBUG,
// that every member passed the same counts. And the heap's live allocations, which the same
// checks and shmoe_heap_allocation consult.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include "shmoe/runtime.hpp"  // AgreedValue

namespace shmoe {

class Runtime;
class Team;

inline constexpr int kMaxAgreedValues = SHMOE_AGREE_MAX_VALUES;

// Collective over `team` (its mutex held by the caller): "" when no member refuses `call`
// (refusal: this PE's reason, or nullptr) and every member passed the same values; otherwise the
// same verdict's message on every member (a refusing member gets its own reason).
std::string agree_on(Team& team, const char* call, const char* refusal, const AgreedValue* values,
                     int n_values);

// The live heap allocation (offset, size) that holds [p, p + bytes), if any.
std::optional<std::pair<std::size_t, std::size_t>> heap_allocation_of(Runtime& rt, const void* p,
                                                                      std::size_t bytes);
// Under SHMOE_DEBUG: a remote range in the heap must lie inside one live allocation (an iput
// stride or a count that runs into the neighbouring object is refused by name).
void check_within_allocation(Runtime& rt, const void* target, std::size_t bytes, const char* fn,
                             const char* param);

}  // namespace shmoe
