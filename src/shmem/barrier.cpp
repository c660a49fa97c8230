#include "shmem/barrier.hpp"

#include <fmt/ranges.h>

#include <atomic>
#include <vector>

#include "common/backoff.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/pe_loss.hpp"
#include "common/settings.hpp"

namespace shmoe {
namespace {

using transport::AmoOp;

// The central barrier's release word holds the barrier number in bits 1..31 (see WakeWord).
std::uint32_t release_value(std::uint64_t epoch) {
  return static_cast<std::uint32_t>(epoch) << 1;
}

}  // namespace

Barrier::Algorithm Barrier::choose(bool oversubscribed) {
  if (auto forced = settings::barrier()) return *forced;
  return oversubscribed ? Algorithm::kCentral : Algorithm::kDissemination;
}

std::string_view Barrier::name(Algorithm algorithm) {
  return settings::name_of(algorithm);
}

Barrier::Algorithm Barrier::parse(std::string_view name) {
  if (auto algorithm = settings::choice_named<Algorithm>(name)) return *algorithm;
  throw make_error("PE 0 chose the barrier '{}', which is not one of {}", name,
                   settings::choice_list<Algorithm>());
}

Barrier::Barrier(transport::Transport& transport, std::size_t flags_offset, std::byte* local_flags,
                 PeSet pes, int my_index, Algorithm algorithm, bool over_live_after_loss)
    : transport_(transport),
      flags_offset_(flags_offset),
      local_flags_(local_flags),
      root_flags_(transport.direct_base(pes.pe(0))),
      pes_(pes),
      my_index_(my_index),
      algorithm_(algorithm),
      over_live_after_loss_(over_live_after_loss) {
  while ((1 << rounds_) < pes.size) ++rounds_;
  if (algorithm_ != Algorithm::kCentral) return;
  // The waiters sleep on a word in the first PE's segment, which takes a mapping of it.
  if (root_flags_ == nullptr) {
    throw make_error(
        "the central barrier needs PE {}'s symmetric heap mapped, and the {} "
        "transport does not map it: set SHMOE_BARRIER=dissemination",
        pes.pe(0), transport.name());
  }
  root_flags_ += flags_offset;
}

// Each PE first says which barrier it entered (its entered word, release order): that is all a
// barrier over the live PEs needs. Under SHMOE_PE_LOSS=continue, once the store has declared a
// PE lost, a barrier made over_live_after_loss runs over the live PEs instead (wait_over_live),
// this one and every later one; a wait of the usual algorithms ends when a loss is declared and
// goes on there.
void Barrier::arrive_and_wait() {
  ++epoch_;
  std::atomic_ref(*local_word(kEnteredOffset)).store(epoch_, std::memory_order_release);
  const bool watch = over_live_after_loss_ && watch_lost_pes();
  const LostPesHandledHere lost_pes_left_out_here(watch);
  if (watch && any_pe_lost()) return wait_over_live();
  const bool done =
      algorithm_ == Algorithm::kCentral ? gather_and_release(watch) : disseminate(watch);
  if (!done) wait_over_live();
}

// The membership is what the store says: it declares each lost PE once, to every PE, and a lost
// PE never comes back; so no PE leaves before every PE not declared lost has entered this
// barrier, whichever algorithm each of them started it with.
void Barrier::wait_over_live() {
  for (int i = 0; i < pes_.size; ++i) {
    const int pe = pes_.pe(i);
    if (i == my_index_) continue;
    auto entered = [&] {
      return transport_.fetch_atomic(nullptr, pe, flags_offset_ + kEnteredOffset,
                                     {AmoOp::kLoad, 8, 0, 0});
    };
    wait_until([&] { return pe_lost(pe) || entered() >= epoch_; },
               [&] {
                 const std::uint64_t now = entered();
                 return WaitState{"barrier",
                                  fmt::format("barrier #{} over the live PEs (waiting for PE {}: "
                                              "it entered barrier #{}; lost PEs: {})",
                                              epoch_, pe, now, fmt::join(lost_pes(), ", ")),
                                  pe,
                                  epoch_,
                                  now,
                                  epoch_};
               });
  }
}

// A release store of the barrier number, not an atomic add: exactly one PE signals a given
// counter, once per barrier and in order, so a store suffices, and unlike a locked add it lets
// this PE go on to poll its own counter while the store travels (about 0.1 us less per round).
bool Barrier::disseminate(bool end_on_loss) {
  for (int r = 0; r < rounds_; ++r) {
    const int to = pes_.pe((my_index_ + (1 << r)) % pes_.size);
    transport_.fetch_atomic(nullptr, to, flags_offset_ + r * kLineBytes,
                            {AmoOp::kStore, 8, epoch_, 0});
    if (!wait_for_round(r, end_on_loss)) return false;
  }
  return true;
}

bool Barrier::wait_for_round(int round, bool end_on_loss) {
  std::atomic_ref<std::uint64_t> seen(*local_word(round * kLineBytes));
  bool lost = false;
  wait_until(
      [&] {
        if (seen.load(std::memory_order_acquire) >= epoch_) return true;
        return lost = end_on_loss && any_pe_lost();
      },
      [&] {
        const int from = pes_.pe((my_index_ - (1 << round) % pes_.size + pes_.size) % pes_.size);
        const std::uint64_t now = seen.load();
        return WaitState{"barrier",
                         fmt::format("barrier #{} round {} (waiting for PE {}: counter {} < {})",
                                     epoch_, round, from, now, epoch_),
                         from,
                         epoch_,
                         now,
                         epoch_};
      });
  return !lost;
}

// The arrival counter's acq_rel add makes the last arrival see every other PE's data, and its
// release publication passes that on to the waiters.
bool Barrier::gather_and_release(bool end_on_loss) {
  const std::uint64_t before = transport_.fetch_atomic(
      nullptr, pes_.pe(0), flags_offset_ + kArrivalsOffset, {AmoOp::kAdd, 8, 1, 0});
  const std::uint64_t to_come = epoch_ * static_cast<std::uint64_t>(pes_.size) - before - 1;
  WakeWord release(reinterpret_cast<std::uint32_t*>(root_flags_ + kReleaseOffset));
  if (to_come == 0) {
    release.publish(release_value(epoch_));
    return true;
  }
  // Spinning pays only while every PE still to come may be running on another core. When more
  // are to come than there are other cores, one of them waits for a core, perhaps this one.
  const WaitPolicy& p = wait_policy();
  const bool may_all_run = to_come < static_cast<std::uint64_t>(p.cores);
  return release.wait_for(
      release_value(epoch_), may_all_run ? p.spin_iterations : 0,
      [&] { return describe_missing(); }, end_on_loss);
}

// Which PEs have not entered this barrier yet. The central barrier has a single round; calling
// it round 0 keeps hang reports alike whichever algorithm runs.
WaitState Barrier::describe_missing() const {
  std::vector<int> missing;
  for (int i = 0; i < pes_.size; ++i) {
    const int pe = pes_.pe(i);
    if (transport_.fetch_atomic(nullptr, pe, flags_offset_ + kEnteredOffset,
                                {AmoOp::kLoad, 8, 0, 0}) < epoch_) {
      missing.push_back(pe);
    }
  }
  const auto expected = epoch_ * static_cast<std::uint64_t>(pes_.size);
  const std::uint64_t arrivals = transport_.fetch_atomic(
      nullptr, pes_.pe(0), flags_offset_ + kArrivalsOffset, {AmoOp::kLoad, 8, 0, 0});
  if (missing.empty()) {
    return {
        "barrier",
        fmt::format("barrier #{} round 0 (every PE has arrived, waiting for the release)", epoch_),
        pes_.pe(0),
        expected,
        arrivals,
        epoch_};
  }
  return {"barrier",
          fmt::format("barrier #{} round 0 (waiting for PE {}; PEs yet to arrive: {})", epoch_,
                      missing.front(), fmt::join(missing, ", ")),
          missing.front(),
          expected,
          arrivals,
          epoch_};
}

std::uint64_t* Barrier::local_word(std::size_t offset) const {
  return reinterpret_cast<std::uint64_t*>(local_flags_ + offset);
}

}  // namespace shmoe
