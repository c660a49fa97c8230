#include "shmem/barrier.hpp"

#include <atomic>

#include "common/backoff.hpp"
#include "common/log.hpp"

namespace shmoe {

DisseminationBarrier::DisseminationBarrier(transport::Transport& transport,
                                           std::size_t flags_offset, std::byte* local_flags,
                                           PeSet pes, int my_index)
    : transport_(transport),
      flags_offset_(flags_offset),
      local_flags_(local_flags),
      pes_(pes),
      my_index_(my_index),
      rounds_(0) {
  while ((1 << rounds_) < pes.size) ++rounds_;
}

void DisseminationBarrier::arrive_and_wait() {
  ++epoch_;
  for (int r = 0; r < rounds_; ++r) {
    const int to = pes_.pe((my_index_ + (1 << r)) % pes_.size);
    transport_.atomic(to, flags_offset_ + r * kFlagStride, {transport::AmoOp::kAdd, 8, 1, 0});
    auto* counter = reinterpret_cast<std::uint64_t*>(local_flags_ + r * kFlagStride);
    std::atomic_ref<std::uint64_t> seen(*counter);
    wait_until([&] { return seen.load(std::memory_order_acquire) >= epoch_; },
               [&] {
                 const int from =
                     pes_.pe((my_index_ - (1 << r) % pes_.size + pes_.size) % pes_.size);
                 return fmt::format("barrier #{} round {} (waiting for PE {}: counter {} < {})",
                                    epoch_, r, from, seen.load(), epoch_);
               });
  }
}

}  // namespace shmoe
