// How every wait in shmoe waits: spin briefly (the peer is usually running on another core), then
// yield the core (with 8 PEs on 2 cores the peer needs it), then sleep in growing steps (so idle
// waiters cost nothing). A wait that lasts longer than the hang timeout stops the PE with a
// report of what it waited for, instead of hanging silently.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace shmoe {

struct WaitPolicy {
  std::uint32_t spin_iterations = 256;    // pause instructions before the first yield
  std::uint32_t yield_iterations = 4096;  // sched_yield calls before sleeping
  std::chrono::microseconds max_sleep{200};
  std::chrono::milliseconds hang_timeout{60'000};  // 0: never report
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

class Backoff {
 public:
  // One step of waiting. Returns true when the hang timeout has passed.
  bool pause();
  std::chrono::steady_clock::duration waited() const;

 private:
  std::uint32_t steps_ = 0;
  std::uint32_t sleep_us_ = 1;
  std::chrono::steady_clock::time_point start_{};
};

// Stops the process: "<what> has waited N s ...". `what` says which call, which address, the
// expected and seen values and from which PE the data should come.
[[noreturn]] void report_hang(const std::string& what, std::chrono::steady_clock::duration waited);

// Polls `ready()` until it returns true, backing off; `describe()` is only called on a hang.
template <typename Ready, typename Describe>
void wait_until(Ready&& ready, Describe&& describe) {
  Backoff backoff;
  while (!ready()) {
    if (backoff.pause()) report_hang(describe(), backoff.waited());
  }
}

}  // namespace shmoe
