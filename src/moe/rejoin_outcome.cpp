// Shrink mode's rejoin outcome records (settle_rejoin_outcomes, context_state.hpp).
#include <fmt/format.h>
#include <shmem.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include "common/backoff.hpp"
#include "moe/context_state.hpp"
#include "moe/remote_words.hpp"

namespace shmoe::moe {
namespace {

void record_outcome(const MoeBuffer::State& s, std::uint64_t a, const LiveSet& live) {
  for (int pe = 0; pe < s.n_pes; ++pe) {
    const std::uint64_t v = live.live(pe) ? FlagArray::arrived(a) : FlagArray::left_without(a);
    std::atomic_ref<std::uint64_t>(*s.rejoin_outcome.slot(pe)).store(v, std::memory_order_release);
  }
}

// What a PE's record of attempt a says of this PE: nullopt while that PE is still in the
// attempt, "" if it counted this PE in, else why this PE leaves it out.
std::optional<std::string> verdict(const std::optional<std::uint64_t>& record, std::uint64_t a,
                                   std::chrono::milliseconds bound) {
  if (!record) {
    return fmt::format("it answered no get of its rejoin record within {} ms (stopped?)",
                       bound.count() / 4);
  }
  if (*record / 2 < a) return std::nullopt;
  if (*record == FlagArray::arrived(a)) return "";
  if (*record == FlagArray::left_without(a)) return "its record says it ended it without this PE";
  return "it went on to a later rejoin before this PE read its record";
}

}  // namespace

void settle_rejoin_outcomes(MoeBuffer::State& s, std::uint64_t a, const LiveSet& live) {
  using Clock = std::chrono::steady_clock;
  record_outcome(s, a, live);
  // On this host the flags land in order, without being held: nothing to read there.
  std::vector<bool> pending(static_cast<std::size_t>(s.n_pes), false);
  int left = 0;
  for (int pe = 0; pe < s.n_pes; ++pe) {
    const bool far = shmem_ptr(s.rejoin_outcome.slot(s.me), pe) == nullptr;
    pending[static_cast<std::size_t>(pe)] = pe != s.me && live.live(pe) && far;
    left += pending[static_cast<std::size_t>(pe)];
  }
  // A PE that came ends the attempt within its bound of coming; twice that is ample.
  const auto deadline = Clock::now() + 2 * live.bound();
  shmoe::wait_until(
      [&] {
        const auto records =
            read_remote_words(live, s.rejoin_outcome.slot(s.me), pending, "rejoin records");
        for (int pe = 0; pe < s.n_pes; ++pe) {
          const auto p = static_cast<std::size_t>(pe);
          if (!pending[p]) continue;
          const std::optional<std::string> why = verdict(records[p], a, live.bound());
          if (!why) continue;
          pending[p] = false;
          --left;
          if (!why->empty()) live.mask(pe, "rejoin", a, *why);
        }
        return left == 0 || Clock::now() >= deadline;
      },
      [&] {
        return shmoe::WaitState{
            "rejoin", fmt::format("rejoin #{}: records of PEs on other hosts", a), -1, 0, 0, a};
      });
  for (int pe = 0; pe < s.n_pes; ++pe) {
    if (pending[static_cast<std::size_t>(pe)]) {
      live.mask(pe, "rejoin", a,
                fmt::format("its record did not show the attempt ended within {} ms",
                            2 * live.bound().count()));
    }
  }
  record_outcome(s, a, live);  // with those masked here
}

}  // namespace shmoe::moe
