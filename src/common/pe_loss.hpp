// The PEs this process knows to be lost: under SHMOE_PE_LOSS=continue the config store does not
// end the job when a PE's connection closes without a goodbye (it was killed, or crashed), but
// tells every PE which ranks it lost, and the PE's service thread records them here. Any thread
// may ask, without a lock: a wait for a lost PE cannot end, and should say so at once rather
// than at SHMOE_HANG_TIMEOUT (see Backoff); shrink-mode MoE waits mask a lost PE instead.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/wait_state.hpp"

namespace shmoe {

// Ranks at or above this are never reported lost (the set is a fixed bitmap, so that reading it
// needs neither a lock nor an allocation that could move under a reader).
inline constexpr int kMaxTrackedPes = 1 << 16;

// Whether the store reported PE `pe` lost in this job. Cheap (one relaxed load when no PE was
// lost); safe from any thread.
bool pe_lost(int pe);
// Whether any PE was reported lost.
bool any_pe_lost();
// The lost PEs, ascending.
std::vector<int> lost_pes();

// Records the ranks of `list`, the store's comma list ("2,5"). Throws shmoe::Error naming the
// text when it is not such a list (it comes from the store, which only ever writes one).
void mark_pes_lost(std::string_view list);
// Forgets every lost PE: a new initialization of the library starts a new job.
void clear_lost_pes();

// Whether waits watch for lost PEs: set at start-up where SHMOE_PE_LOSS=continue (otherwise a
// lost PE ends the whole job, and no wait needs to look).
void set_watch_lost_pes(bool on);
bool watch_lost_pes();

// While one lives, this thread's waits do not end when the PE they wait for is lost: the code
// that waits handles lost PEs itself (shrink-mode MoE waits mask a PE that does not come within
// their bound, and may ask pe_lost() to mask it sooner). Nests.
class LostPesHandledHere {
 public:
  explicit LostPesHandledHere(bool active = true);
  ~LostPesHandledHere();
  LostPesHandledHere(const LostPesHandledHere&) = delete;
  LostPesHandledHere& operator=(const LostPesHandledHere&) = delete;

 private:
  bool active_;
};
bool lost_pes_handled_here();

// Stops the process if `what` waits for a PE that is lost and this thread does not handle lost
// PEs itself: the message names the wait and the lost PE. Returns otherwise.
void fail_if_waiting_for_lost_pe(const WaitState& what);

}  // namespace shmoe
