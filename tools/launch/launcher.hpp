// shmoerun's process supervision: start N PEs, relay (and optionally tag) their output, and end
// the job as soon as one PE fails, naming it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace shmoe::tools {

struct LaunchOptions {
  int n_pes = 1;
  bool prefix_output = false;
  std::chrono::milliseconds job_timeout{0};  // 0: no limit
  std::chrono::milliseconds kill_grace{3000};
  std::string store_address;  // HOST:PORT the PEs connect to; empty: run_job runs a store
  std::vector<std::string> command;
};

// Runs the job to its end and returns the launcher's exit status: 0 when every PE exited 0,
// else the first failing PE's status (128+signal for a signal), 124 on job timeout, 130 on
// Ctrl-C.
int run_job(LaunchOptions options);

}  // namespace shmoe::tools
