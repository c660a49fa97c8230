// The launcher's side of hang reports: it reads what the PEs published in the config store (see
// src/shmem/hang_watch.hpp), through a tool connection opened on first use.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "bootstrap/config_store.hpp"
#include "hang_verdict.hpp"

namespace shmoe::tools {

class HangReports {
 public:
  HangReports(std::string store_address, int n_pes);
  ~HangReports();

  // Whether a PE of the job published a hang (a wait exceeded SHMOE_HANG_TIMEOUT).
  bool job_hung();
  // Forgets the reports published so far, so that gather() waits for fresh ones.
  void clear();
  // Ranks that said hello and not yet goodbye: the PEs whose SIGUSR1 handler is installed.
  std::vector<int> running_ranks();
  // The verdict (see hang_verdict.hpp) on every PE's report and on which PEs have finalized,
  // waiting at most `wait` in all for reports still to come.
  HangVerdict verdict(std::chrono::milliseconds wait);

 private:
  // Every PE's report (null where none came, or the PE has finalized: it will send none).
  std::vector<nlohmann::json> gather(std::chrono::milliseconds wait,
                                     const std::vector<bool>& finalized);
  std::vector<bool> finalized_ranks();
  bootstrap::ConfigStoreClient& client();

  std::string address_;
  int n_pes_;
  std::unique_ptr<bootstrap::ConfigStoreClient> client_;
};

}  // namespace shmoe::tools
