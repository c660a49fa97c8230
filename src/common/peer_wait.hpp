// Shrink-mode MoE calls bound this thread's waits for a peer's answer over the network. While a
// PeerWaitBound lives, a UCX flush to a PE that does not answer within the bound gives up and
// marks the PE unanswered (process-wide), and later flushes to it give up at once: a PE stopped
// on another host answers nothing until it resumes. The MoE layer masks an unanswered PE as one
// that missed its bound; a rejoin clears the marks. Outside such a scope waits are unchanged.
#pragma once

#include <chrono>

namespace shmoe {

class PeerWaitBound {
 public:
  // Inactive (no bound) when `active` is false; nests, the innermost bound counting.
  PeerWaitBound(std::chrono::milliseconds bound, bool active);
  ~PeerWaitBound();
  PeerWaitBound(const PeerWaitBound&) = delete;
  PeerWaitBound& operator=(const PeerWaitBound&) = delete;

 private:
  bool active_;
  std::chrono::milliseconds outer_{0};
};

// This thread's bound (zero: its waits are not bounded).
std::chrono::milliseconds peer_wait_bound();

void mark_pe_unanswered(int pe);
// Whether a bounded wait gave up on PE `pe` since the last clear_unanswered_pes(). Cheap.
bool pe_unanswered(int pe);
void clear_unanswered_pes();

}  // namespace shmoe
