// How every wait in shmoe waits: spin briefly (the peer is usually running on another core), then
// yield the core (with 8 PEs on 2 cores the peer needs it), then sleep in growing steps (so idle
// waiters cost nothing). A wait that lasts longer than the hang timeout stops the PE with a
// report of what it waited for, instead of hanging silently.
//
// A wait for a word whose writer cooperates can do better than polling: see WakeWord below.
#pragma once

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "common/wait_registry.hpp"
#include "common/wait_state.hpp"

namespace shmoe {

struct WaitPolicy {
  // Pause instructions (~20 ns each) before the first yield: about what a context switch costs,
  // so that guessing wrong either way costs at most twice the best choice.
  std::uint32_t spin_iterations = 256;
  // wait_until spins between these bounds instead, adapting per thread: each wait that spinning
  // ended doubles the budget, each that had to yield anyway halves it. That matters when PEs
  // outnumber cores: two PEs ping-ponging on their own cores want long spins, a ring of PEs that
  // take turns on one core wants none. Equal bounds turn adaptation off.
  std::uint32_t min_spin_iterations = 256;
  std::uint32_t max_spin_iterations = 256;
  std::uint32_t yield_iterations = 4096;  // sched_yield calls before sleeping
  // How long a WakeWord waiter yields before it sleeps: about what waking a sleeper costs when
  // its core has gone idle (~50-200 us in a VM), for the same reason as spin_iterations.
  std::chrono::microseconds yield_time{200};
  std::chrono::microseconds max_sleep{200};
  std::chrono::milliseconds hang_timeout{60'000};  // 0: never report
  int cores = 1;                                   // cores this PE may run on
  // PEs on this host outnumber its cores, so the PE waited for is often not running.
  bool oversubscribed = false;
};

// Process-wide; set once by shmem_init from SHMOE_HANG_TIMEOUT and friends.
WaitPolicy& wait_policy();

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Work every wait does between its looks, registered by a transport whose operations complete
// only while someone drives them (UCX: a peer's put into this PE lands when this PE's worker
// progresses). `progress` runs at every step; `sleep`, if given, replaces a step's sleep: it
// blocks for at most the given time but returns as soon as a message for this PE arrives (a
// peer's put would otherwise wait out the sleep, as on a peer that waits in a barrier). nullptr:
// none. Set while no wait runs (start-up and teardown).
using WaitProgress = void (*)(void* arg);
using WaitSleep = void (*)(void* arg, std::chrono::microseconds at_most);
void set_wait_progress(WaitProgress progress, WaitSleep sleep, void* arg);
void run_wait_progress();

// How often a wait that has left its spin phase asks whether the PE it waits for was lost
// (SHMOE_PE_LOSS=continue; see pe_loss.hpp).
inline constexpr std::chrono::milliseconds kLostPeCheckEvery{100};

class Backoff {
 public:
  // `ticket`, if given, is listed for hang reports when the wait leaves its spin phase.
  explicit Backoff(WaitTicket* ticket = nullptr) : ticket_(ticket) {}
  // One step of waiting. Returns true when the hang timeout has passed.
  bool pause();
  std::chrono::steady_clock::duration waited() const;

 private:
  void start_spinning();
  void check_for_lost_pe();

  WaitTicket* ticket_;
  std::uint32_t spin_ = 0;  // this wait's spin budget; set by the first pause()
  std::uint32_t steps_ = 0;
  std::uint32_t sleep_us_ = 1;
  std::chrono::steady_clock::time_point start_{};
  std::chrono::steady_clock::time_point next_loss_check_{};
};

// Stops the process: "hang: <what> has waited N s ...", after the hang handler (see
// hang_report.hpp) has written the reports. `what` says which call, which address, the expected
// and seen values and from which PE the data should come.
[[noreturn]] void report_hang(const WaitState& what, std::chrono::steady_clock::duration waited);

// Polls `ready()` until it returns true, backing off. `describe()` returns a WaitState (or just
// a sentence) and is only called for a hang report: at the timeout, or when one is asked for;
// and, once a PE of the job was lost (SHMOE_PE_LOSS=continue), every kLostPeCheckEvery of a slow
// wait, which stops the PE if its `peer` is lost (see pe_loss.hpp for the waits exempted).
template <typename Ready, typename Describe>
void wait_until(Ready&& ready, Describe&& describe) {
  WaitTicket ticket(describe);
  Backoff backoff(&ticket);
  while (!ready()) {
    if (backoff.pause()) report_hang(ticket.describe(), backoff.waited());
  }
}

// A 32-bit word in shared memory (a MAP_SHARED mapping, possibly at different addresses in each
// process) that waiters can sleep on in the kernel (a futex) and be woken by the very store they
// wait for, instead of polling with sleeps of a guessed length. That needs the writer's help, so
// it only suits protocols in which every writer uses publish(); user words written by plain puts
// cannot use it.
//
// Bit 0 is the waiters' flag, "someone may be asleep here": a waiter sets it before sleeping and
// publish() swaps it out with the new value, so publish() makes the (costly) wake-up system call
// only when somebody may be asleep, and no wake-up can fall between a waiter's last look and its
// sleep. Values therefore live in bits 1..31, and wrap: compare them for equality only.
class WakeWord {
 public:
  explicit WakeWord(std::uint32_t* word) : word_(word) {}

  bool holds(std::uint32_t v) const {
    return value(std::atomic_ref(*word_).load(std::memory_order_acquire)) == value(v);
  }

  // Stores `v` with release order (what this PE wrote before is visible to whoever sees `v`)
  // and wakes every sleeper.
  void publish(std::uint32_t v);

  // Returns once the word holds `v` (acquire order), or stops the PE with describe()'s text after
  // the hang timeout. Spins `spin` pause instructions (worth it only while the writer may be
  // running), then yields the core for wait_policy().yield_time, then sleeps until publish()
  // wakes it. Yields come before sleeping because a sleeper can leave its core idle,
  // and waking an idle core costs far more than a yield (~50-200 us against ~5 us in a VM).
  // With `end_on_loss`, it also returns (false) once a PE of the job is lost, within
  // kLostPeCheckEvery: the caller goes on without the lost PE (see Barrier).
  template <typename Describe>
  bool wait_for(std::uint32_t v, std::uint32_t spin, Describe&& describe,
                bool end_on_loss = false) {
    if (holds(v)) return true;
    WaitTicket ticket(describe);
    const Slowly r = wait_slowly(v, spin, ticket, end_on_loss);
    if (r.hung) report_hang(ticket.describe(), *r.hung);
    return !r.lost;
  }

 private:
  static constexpr std::uint32_t kSleepers = 1;  // the waiters' flag

  static std::uint32_t value(std::uint32_t v) { return v & ~kSleepers; }
  // Each returns true once the word holds `v`.
  bool spin_for(std::uint32_t v, std::uint32_t spins) const;
  bool yield_for(std::uint32_t v, std::chrono::steady_clock::time_point until) const;
  bool sleep_once(std::uint32_t v, const timespec* timeout);
  // How a slow wait ended: at the hang timeout (how long it waited), or because a PE was lost.
  struct Slowly {
    std::optional<std::chrono::steady_clock::duration> hung;
    bool lost = false;
  };
  Slowly wait_slowly(std::uint32_t v, std::uint32_t spin, WaitTicket& ticket, bool end_on_loss);

  std::uint32_t* word_;
};

}  // namespace shmoe
