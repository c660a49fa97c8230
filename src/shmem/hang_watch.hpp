// A PE's part in job-wide hang reports. When a wait of this PE exceeds SHMOE_HANG_TIMEOUT, the
// PE writes its report, publishes kHangKey in the config store and gives the others a few
// seconds to write theirs before it stops; every PE has kHangKey pushed to it by the store (the
// PeService watches it) and answers with its report. SIGUSR1 makes a PE write its report at any
// time. Reports also go to the store under kReportKeyPrefix + rank, where shmoerun reads them
// for its verdict.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <string_view>

#include "bootstrap/config_store.hpp"
#include "common/wait_state.hpp"

namespace shmoe {

inline constexpr std::string_view kHangKey = "shmoe/hang";
inline constexpr std::string_view kHangAcksKey = "shmoe/hang_acks";
inline constexpr std::string_view kReportKeyPrefix = "shmoe/hang_report/";

class HangWatch {
 public:
  // Reports through `client` (the PE's one store connection, shared). Installs the SIGUSR1
  // handler unless the program has its own, and blocks SIGUSR1 in the calling thread (so in
  // the threads it starts from now on) for the thread that calls accept_sigusr1_here. Throws
  // shmoe::Error for a bad SHMOE_HANG_REPORT, or one naming a place where the report cannot
  // be written.
  HangWatch(bootstrap::ConfigStoreClient& client, int rank, int size);
  ~HangWatch();  // restores SIGUSR1
  HangWatch(const HangWatch&) = delete;
  HangWatch& operator=(const HangWatch&) = delete;

  // On a timeout in this PE (the hang handler): report, tell the others, wait for their reports
  // for at most kPeerReportWait.
  void on_timeout(const WaitState& timed_out);
  // Another PE published kHangKey with `what`: report what this PE waits for.
  void on_peer_hang(std::string_view what);

  // Readable once SIGUSR1 came or stop() was called; on_wake says which.
  int wake_fd() const { return signal_pipe_[0]; }
  // Writes the report SIGUSR1 asked for; false once stop() was called.
  bool on_wake();
  void stop();
  // Unblocks SIGUSR1 in the calling thread: the one that waits on wake_fd.
  static void accept_sigusr1_here();

  static constexpr std::chrono::seconds kPeerReportWait{3};

 private:
  void report(std::string_view reason, const WaitState* timed_out = nullptr);
  void acknowledge();

  bootstrap::ConfigStoreClient& client_;
  int rank_;
  int size_;
  std::atomic<bool> acknowledged_{false};
  std::atomic<bool> timed_out_{false};  // a wait of this PE timed out and reported
  int signal_pipe_[2] = {-1, -1};
  bool own_sigusr1_ = false;
  bool masked_ = false;  // SIGUSR1 blocked in masked_thread_, which had saved_mask_ before
  pthread_t masked_thread_{};
  sigset_t saved_mask_{};
};

}  // namespace shmoe
