// A PE's part in job-wide hang reports. When a wait of this PE exceeds SHMOE_HANG_TIMEOUT, the
// PE writes its report, publishes kHangKey in the config store and gives the others a few
// seconds to write theirs before it stops; every PE watches kHangKey (on its own connection) and
// answers with its report. SIGUSR1 makes a PE write its report at any time. Reports also go to
// the store under kReportKeyPrefix + rank, where shmoerun reads them for its verdict.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>

#include "bootstrap/config_store.hpp"
#include "common/wait_state.hpp"

namespace shmoe {

inline constexpr std::string_view kHangKey = "shmoe/hang";
inline constexpr std::string_view kHangAcksKey = "shmoe/hang_acks";
inline constexpr std::string_view kReportKeyPrefix = "shmoe/hang_report/";

// Blocks SIGUSR1 in the calling thread, so that it reaches the reporting thread: for threads
// of shmoe started before the HangWatch (which blocks it in the threads started after).
void keep_sigusr1_from_this_thread();

class HangWatch {
 public:
  // Connects two monitor connections to the store and starts the watching threads; installs the
  // SIGUSR1 handler unless the program has its own. Throws shmoe::Error for a bad
  // SHMOE_HANG_REPORT, or one naming a place where the report cannot be written.
  HangWatch(const bootstrap::StoreAddress& store, bootstrap::Hello hello, int size,
            std::chrono::milliseconds connect_timeout);
  ~HangWatch();  // stops the threads, restores SIGUSR1
  HangWatch(const HangWatch&) = delete;
  HangWatch& operator=(const HangWatch&) = delete;

  // On a timeout in this PE (the hang handler): report, tell the others, wait for their reports
  // for at most kPeerReportWait.
  void on_timeout(const WaitState& timed_out);

  static constexpr std::chrono::seconds kPeerReportWait{3};

 private:
  void report(std::string_view reason, const WaitState* timed_out = nullptr);
  void acknowledge();
  void watch_store();
  void watch_signal();

  int rank_;
  int size_;
  std::unique_ptr<bootstrap::ConfigStoreClient> watch_client_;  // blocks on kHangKey
  std::mutex post_mutex_;                                       // guards post_client_
  std::unique_ptr<bootstrap::ConfigStoreClient> post_client_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> acknowledged_{false};
  std::atomic<bool> timed_out_{false};  // a wait of this PE timed out and reported
  int signal_pipe_[2] = {-1, -1};
  bool own_sigusr1_ = false;
  bool masked_ = false;  // SIGUSR1 blocked in masked_thread_, which had saved_mask_ before
  pthread_t masked_thread_{};
  sigset_t saved_mask_{};
  std::thread store_thread_;
  std::thread signal_thread_;
};

}  // namespace shmoe
