// shmoe_agree and shmoe_heap_allocation (include/shmoe/runtime.h): the one agreement by which a
// collective call is refused on every PE or on none, and the heap's live allocations.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shmem/agreement.hpp"
#include "shmem/collectives.hpp"
#include "shmem/last_error.hpp"
#include "shmem/runtime.hpp"
#include "shmem/team.hpp"
#include "shmoe/runtime.h"

namespace shmoe {
namespace {

thread_local std::string t_last_error;

constexpr std::uint64_t kNobody = std::numeric_limits<std::uint64_t>::max();

// int64 -> uint64 in the same order, so that an unsigned min-reduction finds the signed min.
std::uint64_t ordered(std::int64_t v) {
  return static_cast<std::uint64_t>(v) ^ (std::uint64_t{1} << 63);
}
std::int64_t from_ordered(std::uint64_t u) {
  return static_cast<std::int64_t>(u ^ (std::uint64_t{1} << 63));
}

// A refusal's text as it travels: at most this many bytes, through the team's scratch.
constexpr std::size_t kReasonBytes = 1024;
static_assert(kReasonBytes <= TeamScratch::kDataBytes);

// The reason of member `refuser`, which it wrote into its own team scratch: after the reduction
// no member uses the scratch until every member has left this call, so it is free here.
std::string reason_of(Team& team, int refuser, const char* mine) {
  const bool me = team.my_index() == refuser;
  if (me) {
    const std::size_t n = std::min(std::strlen(mine), kReasonBytes - 1);
    std::memcpy(team.local_data(), mine, n);
    team.local_data()[n] = std::byte{0};
  }
  team.sync();  // the text is in place
  std::vector<char> text(kReasonBytes, '\0');
  if (!me) {
    team.transport().get(nullptr, team.world_pe(refuser), team.data_offset(), text.data(),
                         kReasonBytes - 1);
  }
  team.sync();  // every member has read it: the scratch is the next collective's again
  return me ? std::string(mine) : std::string(text.data());
}

}  // namespace

std::string agree_on(Team& team, const char* call, const char* refusal, const AgreedValue* values,
                     int n_values) {
  // Word 0: the lowest refusing member; then each value's min and (as its complement) max.
  // Always every word, whatever n_values: a refusing PE may pass no values where the others
  // pass some, and the reduction must be the same size on every member. A value this PE does
  // not pass is neutral (the most for the min, the least for the max).
  std::uint64_t mine[1 + 2 * kMaxAgreedValues];
  std::fill(std::begin(mine), std::end(mine), kNobody);
  mine[0] = refusal != nullptr ? static_cast<std::uint64_t>(team.my_index()) : kNobody;
  for (int i = 0; i < n_values; ++i) {
    mine[1 + 2 * i] = ordered(values[i].value);
    mine[2 + 2 * i] = ~ordered(values[i].value);
  }
  std::uint64_t all[1 + 2 * kMaxAgreedValues];
  collectives::reduce<std::uint64_t, collectives::Min>(team, all, mine, std::size(mine));
  if (all[0] != kNobody) {
    const int refuser = static_cast<int>(all[0]);
    // Every refusing PE gives its own reason; the others that of the lowest refusing PE. A
    // reason that starts with the call's name already (as the package's are) does not get it
    // twice.
    std::string reason = reason_of(team, refuser, refusal);
    if (refusal != nullptr) reason = refusal;
    const std::string prefix = std::string(call) + ": ";
    if (reason.starts_with(prefix)) reason.erase(0, prefix.size());
    return refusal != nullptr
               ? fmt::format("{}: {}", call, reason)
               : fmt::format("{}: PE {} refused the call: {}", call, refuser, reason);
  }
  for (int i = 0; i < n_values; ++i) {
    const std::int64_t low = from_ordered(all[1 + 2 * i]), high = from_ordered(~all[2 + 2 * i]);
    if (low != high) {
      return fmt::format(
          "{}: the PEs disagree on {} (values from {} to {}; this PE passed {}): every PE must "
          "pass the same",
          call, values[i].name, low, high, values[i].value);
    }
  }
  return {};
}

namespace {

int agree_from_c(shmem_team_t handle, const char* call, const char* refusal,
                 const std::int64_t* values, const char* const* names, int n_values) {
  const char* fn = "shmoe_agree";
  if (call == nullptr) call = fn;
  if (n_values < 0 || n_values > SHMOE_AGREE_MAX_VALUES || (n_values > 0 && values == nullptr)) {
    t_last_error = fmt::format("{}: n_values={} is out of range (0..{}, with values not NULL)", fn,
                               n_values, SHMOE_AGREE_MAX_VALUES);
    return -1;
  }
  AgreedValue agreed[kMaxAgreedValues];
  for (int i = 0; i < n_values; ++i) {
    if (names == nullptr || names[i] == nullptr) {
      t_last_error = fmt::format("{}: value_names[{}] is NULL", fn, i);
      return -1;
    }
    agreed[i] = {names[i], values[i]};
  }
  Team* team = runtime(fn).teams().resolve(handle, fn, "team");
  if (team == nullptr) {
    t_last_error = fmt::format("{}: team is not a valid team handle", call);
    return -1;
  }
  std::lock_guard lock(team->mutex());
  std::string verdict = agree_on(*team, call, refusal, agreed, n_values);
  if (verdict.empty()) return 0;
  t_last_error = std::move(verdict);
  return -1;
}

}  // namespace

std::optional<std::pair<std::size_t, std::size_t>> heap_allocation_of(Runtime& rt, const void* p,
                                                                      std::size_t bytes) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const auto base = reinterpret_cast<std::uintptr_t>(rt.heap_base());
  if (p == nullptr || a < base || a - base >= rt.heap_size()) return std::nullopt;
  std::lock_guard lock(rt.heap_mutex());
  return rt.allocator().allocation_holding(a - base, bytes);
}

void check_within_allocation(Runtime& rt, const void* target, std::size_t bytes, const char* fn,
                             const char* param) {
  const auto a = reinterpret_cast<std::uintptr_t>(target);
  const auto base = reinterpret_cast<std::uintptr_t>(rt.heap_base());
  if (a < base || a - base >= rt.heap_size()) return;  // the program's data: one object each
  if (!heap_allocation_of(rt, target, bytes)) {
    api_error(fn,
              "{}={} ({} bytes) does not lie inside one live allocation of the symmetric heap: "
              "it runs past the end of its allocation, or that was freed (SHMOE_DEBUG=1 checks "
              "this)",
              param, target, bytes);
  }
}

void set_last_error(std::string text) {
  t_last_error = std::move(text);
}

const std::string& last_error() {
  return t_last_error;
}

}  // namespace shmoe

extern "C" {

const char* shmoe_last_error(void) {
  return shmoe::t_last_error.c_str();
}

int shmoe_agree(shmem_team_t team, const char* call, const char* refusal, const int64_t* values,
                const char* const* value_names, int n_values) {
  try {
    return shmoe::agree_from_c(team, call, refusal, values, value_names, n_values);
  } catch (const std::exception& e) {
    shmoe::t_last_error = fmt::format("shmoe_agree: {}", e.what());
    return -1;
  }
}

int shmoe_heap_allocation(const void* p, size_t bytes, void** start, size_t* size) {
  auto& rt = shmoe::runtime("shmoe_heap_allocation");
  const auto found = shmoe::heap_allocation_of(rt, p, bytes);
  if (!found) return 0;
  if (start != nullptr) *start = rt.heap_base() + found->first;
  if (size != nullptr) *size = found->second;
  return 1;
}

}  // extern "C"
