#include "common/backoff.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "common/hang_report.hpp"
#include "common/log.hpp"
#include "common/pe_loss.hpp"

namespace shmoe {
namespace {

// Not FUTEX_PRIVATE_FLAG: the word is shared between processes, which the kernel then identifies
// by the page it lies in, not by this process's address.
long futex(std::uint32_t* word, int op, std::uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

timespec to_timespec(std::chrono::nanoseconds d) {
  auto s = std::chrono::duration_cast<std::chrono::seconds>(d);
  return {static_cast<time_t>(s.count()), static_cast<long>((d - s).count())};
}

std::atomic<WaitProgress> wait_progress_fn{nullptr};
std::atomic<WaitSleep> wait_sleep_fn{nullptr};
std::atomic<void*> wait_progress_arg{nullptr};

// This thread's spin budget for wait_until (see WaitPolicy); 0 until a wait first sets it.
thread_local std::uint32_t spin_budget = 0;

}  // namespace

void set_wait_progress(WaitProgress progress, WaitSleep sleep, void* arg) {
  wait_progress_arg.store(arg, std::memory_order_relaxed);
  wait_sleep_fn.store(sleep, std::memory_order_relaxed);
  wait_progress_fn.store(progress, std::memory_order_release);
}

void run_wait_progress() {
  if (WaitProgress fn = wait_progress_fn.load(std::memory_order_acquire)) {
    fn(wait_progress_arg.load(std::memory_order_relaxed));
  }
}

WaitPolicy& wait_policy() {
  static WaitPolicy policy;
  return policy;
}

// Adapts this thread's budget (see WaitPolicy) as the wait goes: it first bets that spinning will
// pay and doubles the budget for the next wait, and halves it instead when the spin runs out.
// Learning here, not when the wait ends, keeps it off the path of a wait that spinning ended.
void Backoff::start_spinning() {
  const WaitPolicy& p = wait_policy();
  if (p.min_spin_iterations == p.max_spin_iterations) {
    spin_ = p.max_spin_iterations;
    return;
  }
  spin_ = std::clamp(spin_budget != 0 ? spin_budget : p.max_spin_iterations, p.min_spin_iterations,
                     p.max_spin_iterations);
  spin_budget = std::min(spin_ * 2, p.max_spin_iterations);
}

bool Backoff::pause() {
  const WaitPolicy& p = wait_policy();
  run_wait_progress();
  if (steps_++ == 0) start_spinning();
  if (steps_ <= spin_) {
    cpu_relax();
    return false;
  }
  if (steps_ == spin_ + 1) {
    start_ = std::chrono::steady_clock::now();
    if (ticket_ != nullptr) ticket_->enter();
    if (p.min_spin_iterations != p.max_spin_iterations) {
      spin_budget = std::max(spin_ / 2, p.min_spin_iterations);
    }
  }
  if (steps_ <= spin_ + p.yield_iterations) {
    sched_yield();
  } else {
    if (WaitSleep sleep = wait_sleep_fn.load(std::memory_order_acquire)) {
      sleep(wait_progress_arg.load(std::memory_order_relaxed),
            std::chrono::microseconds(sleep_us_));
    } else {
      timespec ts{0, static_cast<long>(sleep_us_) * 1000};
      nanosleep(&ts, nullptr);
    }
    if (sleep_us_ < static_cast<std::uint32_t>(p.max_sleep.count())) sleep_us_ *= 2;
  }
  // Reading the clock costs more than a yield; every 64th step is often enough.
  if ((steps_ & 63) != 0) return false;
  if (any_pe_lost()) check_for_lost_pe();
  if (p.hang_timeout.count() == 0) return false;
  return waited() > p.hang_timeout;
}

// Describing the wait formats strings: it is done once per kLostPeCheckEvery of waiting, which
// is still quick enough that a wait for a lost PE ends long before any hang timeout would.
void Backoff::check_for_lost_pe() {
  const auto now = std::chrono::steady_clock::now();
  if (ticket_ == nullptr || now < next_loss_check_) return;
  next_loss_check_ = now + kLostPeCheckEvery;
  fail_if_waiting_for_lost_pe(ticket_->describe());
}

std::chrono::steady_clock::duration Backoff::waited() const {
  if (steps_ <= spin_) return {};
  return std::chrono::steady_clock::now() - start_;
}

void report_hang(const WaitState& what, std::chrono::steady_clock::duration waited) {
  const double s = std::chrono::duration<double>(waited).count();
  const std::string line = fmt::format(
      "hang: {} has waited {:.1f} s (SHMOE_HANG_TIMEOUT={:.1f} s); giving up", what.detail, s,
      std::chrono::duration<double>(wait_policy().hang_timeout).count());
  handle_hang(what, s);
  log::fatal(line);
}

void WakeWord::publish(std::uint32_t v) {
  const std::uint32_t before =
      std::atomic_ref(*word_).exchange(value(v), std::memory_order_acq_rel);
  if ((before & kSleepers) != 0) futex(word_, FUTEX_WAKE, INT_MAX, nullptr);
}

bool WakeWord::spin_for(std::uint32_t v, std::uint32_t spins) const {
  for (std::uint32_t i = 0; i < spins; ++i) {
    cpu_relax();
    if (holds(v)) return true;
  }
  return false;
}

bool WakeWord::yield_for(std::uint32_t v, std::chrono::steady_clock::time_point until) const {
  do {
    sched_yield();
    if (holds(v)) return true;
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

// Raises the waiters' flag, then sleeps while the word still holds what this PE saw; publish()
// swaps the flag out, so it cannot miss this sleeper. Spurious returns (EINTR, EAGAIN: the word
// changed, timeouts) are fine: the caller looks again.
bool WakeWord::sleep_once(std::uint32_t v, const timespec* timeout) {
  std::atomic_ref word(*word_);
  std::uint32_t seen = word.load(std::memory_order_acquire);
  if (value(seen) == value(v)) return true;
  if ((seen & kSleepers) == 0 &&
      !word.compare_exchange_strong(seen, seen | kSleepers, std::memory_order_acquire)) {
    return value(seen) == value(v);
  }
  futex(word_, FUTEX_WAIT, seen | kSleepers, timeout);
  return holds(v);
}

WakeWord::Slowly WakeWord::wait_slowly(std::uint32_t v, std::uint32_t spin, WaitTicket& ticket,
                                       bool end_on_loss) {
  const WaitPolicy& p = wait_policy();
  if (spin_for(v, spin)) return {};
  ticket.enter();
  const auto start = std::chrono::steady_clock::now();
  if (yield_for(v, start + p.yield_time)) return {};
  // Where PEs may be lost, no sleep outlasts kLostPeCheckEvery, so that a wait for a lost PE
  // learns of it (see Backoff::check_for_lost_pe).
  const bool watch = watch_lost_pes();
  for (;;) {
    const auto waited = std::chrono::steady_clock::now() - start;
    if (end_on_loss && any_pe_lost()) return {std::nullopt, true};
    if (p.hang_timeout.count() != 0 && waited >= p.hang_timeout) return {waited, false};
    std::optional<std::chrono::nanoseconds> sleep;
    if (p.hang_timeout.count() != 0) sleep = p.hang_timeout - waited;
    if (watch && (!sleep || *sleep > kLostPeCheckEvery)) sleep = kLostPeCheckEvery;
    const timespec ts = to_timespec(sleep.value_or(std::chrono::nanoseconds(0)));
    if (sleep_once(v, sleep ? &ts : nullptr)) return {};
    if (any_pe_lost()) fail_if_waiting_for_lost_pe(ticket.describe());
  }
}

}  // namespace shmoe
