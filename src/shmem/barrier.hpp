// A dissemination barrier (Hensgen, Finkel and Manber): ceil(log2 n) rounds, in round r each PE
// signals the PE 2^r places ahead and waits for the one 2^r places behind. No PE ever polls a word
// that more than one PE writes, so it scales with the team size instead of queueing on one flag.
//
// Each PE holds one 64-bit counter per round (each on its own cache line) in its symmetric heap.
// Counters only grow: in the k-th barrier a PE waits until its round-r counter reaches k. Since
// exactly one PE sends to a given counter, once per barrier and in order, reaching k proves that
// the k-th signal came, and nothing ever needs resetting.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/transport.hpp"

namespace shmoe {

// The PEs {start + i * stride : 0 <= i < size}, as in OpenSHMEM active sets and strided teams.
struct PeSet {
  int start = 0;
  int stride = 1;
  int size = 1;
  int pe(int index) const { return start + index * stride; }
};

class DisseminationBarrier {
 public:
  static constexpr std::size_t kMaxRounds = 32;
  static constexpr std::size_t kFlagStride = 64;
  static constexpr std::size_t kFlagBytes = kMaxRounds * kFlagStride;

  // `flags_offset`: symmetric offset of kFlagBytes of zeroed memory reserved for this barrier;
  // `local_flags`: the same bytes in this PE's own segment.
  DisseminationBarrier(transport::Transport& transport, std::size_t flags_offset,
                       std::byte* local_flags, PeSet pes, int my_index);

  void arrive_and_wait();
  std::uint64_t epoch() const { return epoch_; }

 private:
  transport::Transport& transport_;
  std::size_t flags_offset_;
  std::byte* local_flags_;
  PeSet pes_;
  int my_index_;
  int rounds_;
  std::uint64_t epoch_ = 0;
};

}  // namespace shmoe
