#include "shmem/hang_watch.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/hang_report.hpp"
#include "common/log.hpp"

namespace shmoe {
namespace {

// The signal handler only writes a byte: the report itself (locks, allocation, I/O) is written
// by the thread that reads it.
std::atomic<int> g_signal_fd{-1};
std::atomic<HangWatch*> g_watch{nullptr};

constexpr char kReportByte = 'r';
constexpr char kStopByte = 's';

void on_sigusr1(int) {
  const int saved = errno;
  const int fd = g_signal_fd.load();
  if (fd >= 0) {
    char c = kReportByte;
    ssize_t ignored = ::write(fd, &c, 1);
    (void)ignored;
  }
  errno = saved;
}

void on_hang(const WaitState& timed_out, double) {
  if (HangWatch* w = g_watch.load()) {
    w->on_timeout(timed_out);
  } else {
    write_hang_report(build_hang_report("timeout", &timed_out));
  }
}

}  // namespace

void HangWatch::accept_sigusr1_here() {
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ::pthread_sigmask(SIG_UNBLOCK, &usr1, nullptr);
}

HangWatch::HangWatch(bootstrap::ConfigStoreClient& client, int rank, int size)
    : client_(client), rank_(rank), size_(size) {
  check_hang_report_destination(rank_, size_);  // now, not during a hang
  if (::pipe2(signal_pipe_, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  g_signal_fd.store(signal_pipe_[1]);
  // A program that handles SIGUSR1 itself keeps it; by default SIGUSR1 would end the process.
  struct sigaction old {};
  ::sigaction(SIGUSR1, nullptr, &old);
  if (old.sa_handler == SIG_DFL) {
    struct sigaction sa {};
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    own_sigusr1_ = ::sigaction(SIGUSR1, &sa, nullptr) == 0;
  }
  if (own_sigusr1_) {
    // Blocked in this thread, and so in every thread it starts from now on, the signal goes to
    // the service thread (which unblocks it): it does not cut short a sleep of the program,
    // and it does not wait for a thread asleep in a futex (ThreadSanitizer runs handlers only
    // when the receiving thread next enters the C library).
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    masked_ = ::pthread_sigmask(SIG_BLOCK, &usr1, &saved_mask_) == 0;
    masked_thread_ = ::pthread_self();
  }
  g_watch.store(this);
  set_hang_handler(on_hang);
}

HangWatch::~HangWatch() {
  set_hang_handler(nullptr);
  g_watch.store(nullptr);
  if (masked_ && ::pthread_equal(::pthread_self(), masked_thread_)) {
    ::pthread_sigmask(SIG_SETMASK, &saved_mask_, nullptr);
  }
  g_signal_fd.store(-1);
  if (own_sigusr1_) ::signal(SIGUSR1, SIG_DFL);
  ::close(signal_pipe_[0]);
  ::close(signal_pipe_[1]);
}

void HangWatch::stop() {
  g_signal_fd.store(-1);
  char c = kStopByte;
  ssize_t ignored = ::write(signal_pipe_[1], &c, 1);
  (void)ignored;
}

void HangWatch::report(std::string_view reason, const WaitState* timed_out) {
  const nlohmann::json r = build_hang_report(reason, timed_out);
  write_hang_report(r);
  try {
    client_.set(fmt::format("{}{}", kReportKeyPrefix, rank_), r.dump());
  } catch (const std::exception& e) {
    log::warn("cannot publish the hang report in the config store: {}", e.what());
  }
}

// Each PE counts itself once in kHangAcksKey, whichever of its threads reported first.
void HangWatch::acknowledge() {
  if (acknowledged_.exchange(true)) return;
  try {
    client_.add(kHangAcksKey, 1);
  } catch (const std::exception&) {
    // The store is gone: nobody is left to wait for this PE's report.
  }
}

void HangWatch::on_timeout(const WaitState& timed_out) {
  timed_out_ = true;
  report("timeout", &timed_out);
  acknowledge();
  const auto deadline = std::chrono::steady_clock::now() + kPeerReportWait;
  try {
    client_.compare_and_swap(
        kHangKey, std::nullopt,
        fmt::format("PE {} timed out in {}: {}", rank_, timed_out.op, timed_out.detail));
    // Bounded: a PE that cannot answer (dead, or stuck with signals blocked) costs 3 s, no more.
    while (client_.add(kHangAcksKey, 0) < size_ && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception& e) {
    log::warn("cannot tell the other PEs about the hang: {}", e.what());
  }
}

void HangWatch::on_peer_hang(std::string_view what) {
  // A PE whose own wait timed out has written the more precise report already.
  if (!timed_out_) {
    log::write("info", fmt::format("another PE hung ({}); reporting what this PE waits for", what));
    report("peer_hang");
  }
  acknowledge();
}

bool HangWatch::on_wake() {
  char c = 0;
  ssize_t n;
  do {
    n = ::read(signal_pipe_[0], &c, 1);
  } while (n < 0 && errno == EINTR);
  if (n <= 0 || c == kStopByte) return false;
  report("signal");
  return true;
}

}  // namespace shmoe
