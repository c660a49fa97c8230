#include "common/backoff.hpp"

#include <sched.h>
#include <time.h>

#include "common/log.hpp"

namespace shmoe {

WaitPolicy& wait_policy() {
  static WaitPolicy policy;
  return policy;
}

bool Backoff::pause() {
  const WaitPolicy& p = wait_policy();
  ++steps_;
  if (steps_ <= p.spin_iterations) {
    cpu_relax();
    return false;
  }
  if (steps_ == p.spin_iterations + 1) start_ = std::chrono::steady_clock::now();
  if (steps_ <= p.spin_iterations + p.yield_iterations) {
    sched_yield();
  } else {
    timespec ts{0, static_cast<long>(sleep_us_) * 1000};
    nanosleep(&ts, nullptr);
    if (sleep_us_ < static_cast<std::uint32_t>(p.max_sleep.count())) sleep_us_ *= 2;
  }
  // Reading the clock costs more than a yield; every 64th step is often enough.
  if ((steps_ & 63) != 0 || p.hang_timeout.count() == 0) return false;
  return waited() > p.hang_timeout;
}

std::chrono::steady_clock::duration Backoff::waited() const {
  if (steps_ <= wait_policy().spin_iterations) return {};
  return std::chrono::steady_clock::now() - start_;
}

void report_hang(const std::string& what, std::chrono::steady_clock::duration waited) {
  double s = std::chrono::duration<double>(waited).count();
  log::fatal(fmt::format("hang: {} has waited {:.1f} s (SHMOE_HANG_TIMEOUT={:.1f} s); giving up",
                         what, s,
                         std::chrono::duration<double>(wait_policy().hang_timeout).count()));
}

}  // namespace shmoe
