// Barriers over a set of PEs, with their state in the symmetric heap. Which algorithm is fastest
// depends on whether every PE has a core of its own:
//
// Dissemination (Hensgen, Finkel and Manber), when it does: ceil(log2 n) rounds, in round r each
// PE signals the PE 2^r places ahead and waits for the one 2^r places behind. No PE ever polls a
// word that more than one PE writes, so it scales with the team size instead of queueing on one
// flag, and every hand-off is a single cache line moving between two running cores.
//
// Central, when PEs outnumber the cores. There the cost is not cache lines but context switches
// (~5-9 us each in a VM whose page-table isolation flushes the TLB on every switch): with 8 PEs on
// 2 cores, a dissemination round usually waits for a PE that is not running, so a PE may give up
// its core once per round. Here each PE adds one to an arrival counter on the set's first PE and,
// unless it arrived last, waits for a release word that the last arrival publishes: a PE gives up
// its core at most once per barrier (on 2 cores: 2x faster than dissemination with 4 and with 8
// PEs). Waiters spin only while the PEs still to come may all be running, then yield, and after
// ~200 us sleep in the kernel until the release wakes them (see WakeWord), so a PE that waits
// long costs nothing and PEs that are not in the barrier get the cores. It is not "every PE
// polling one word" at scale: only PEs that hold a core touch the counter or the release word,
// so their contention is bounded by the number of cores, not the number of PEs.
//
// Both count barriers instead of resetting flags. Dissemination: each PE holds one 64-bit counter
// per round (each on its own cache line), and in the k-th barrier the one PE that signals it in
// round r stores k there; reaching k proves that the k-th signal came. Central: the k-th barrier
// is complete when the arrival counter reaches k * n, and the release word then holds k (modulo
// 2^31). Back-to-back barriers need no resetting, because nothing is ever reset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/settings.hpp"
#include "common/wait_state.hpp"
#include "transport/transport.hpp"

namespace shmoe {

// The PEs {start + i * stride : 0 <= i < size}, as in OpenSHMEM active sets and strided teams.
struct PeSet {
  int start = 0;
  int stride = 1;
  int size = 1;
  int pe(int index) const { return start + index * stride; }
};

class Barrier {
 public:
  using Algorithm = settings::Barrier;  // SHMOE_BARRIER

  // Layout of the reserved bytes, one cache line per word: the dissemination round counters,
  // then the number of the last barrier this PE entered (read by hang reports and by the barrier
  // over the live PEs), then the central arrival counter and release word (used on the set's
  // first PE only).
  static constexpr std::size_t kLineBytes = 64;
  static constexpr std::size_t kMaxRounds = 32;
  static constexpr std::size_t kEnteredOffset = kMaxRounds * kLineBytes;
  static constexpr std::size_t kArrivalsOffset = kEnteredOffset + kLineBytes;
  static constexpr std::size_t kReleaseOffset = kArrivalsOffset + kLineBytes;
  static constexpr std::size_t kFlagBytes = kReleaseOffset + kLineBytes;

  // The algorithm for this PE's host; SHMOE_BARRIER (a name()) overrides the choice. PEs must
  // agree on the algorithm, so a runtime takes one PE's choice for all.
  static Algorithm choose(bool oversubscribed);
  static std::string_view name(Algorithm algorithm);
  static Algorithm parse(std::string_view name);  // throws shmoe::Error if it is no name()

  // `flags_offset`: symmetric offset of kFlagBytes of zeroed memory reserved for this barrier;
  // `local_flags`: the same bytes in this PE's own segment. kCentral needs the first PE's segment
  // mapped (transport.direct_base) and throws shmoe::Error where it is not.
  // `over_live_after_loss`: under SHMOE_PE_LOSS=continue, once a PE is lost, this barrier runs
  // over the live PEs (the runtime's world barrier: shmem_barrier_all, shmem_free, finalize);
  // otherwise a wait for a lost PE fails naming it (the teams' barriers, which end collectives
  // whose data needs every member).
  Barrier(transport::Transport& transport, std::size_t flags_offset, std::byte* local_flags,
          PeSet pes, int my_index, Algorithm algorithm = Algorithm::kDissemination,
          bool over_live_after_loss = false);

  void arrive_and_wait();
  std::uint64_t epoch() const { return epoch_; }
  Algorithm algorithm() const { return algorithm_; }

 private:
  // Each returns false where it ended because a PE was lost (only with `end_on_loss`).
  bool disseminate(bool end_on_loss);
  bool wait_for_round(int round, bool end_on_loss);
  bool gather_and_release(bool end_on_loss);
  void wait_over_live();
  WaitState describe_missing() const;
  std::uint64_t* local_word(std::size_t offset) const;

  transport::Transport& transport_;
  std::size_t flags_offset_;
  std::byte* local_flags_;
  std::byte* root_flags_;  // kCentral: the flags in the segment of the set's first PE
  PeSet pes_;
  int my_index_;
  int rounds_ = 0;
  Algorithm algorithm_;
  bool over_live_after_loss_;
  std::uint64_t epoch_ = 0;
};

// The runtime still names the barrier by its first algorithm.
using DisseminationBarrier = Barrier;

}  // namespace shmoe
