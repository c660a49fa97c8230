// shmoerun's process supervision: start N PEs, relay (and optionally tag) their output, and end
// the job as soon as one PE fails, naming it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "torch_env.hpp"

namespace shmoe::tools {

// A job may span hosts: each host's launcher starts a group of PEs, ranks first_rank ..
// first_rank + n_pes - 1 of a job of job_size, and one launcher (or one started with only the
// store) runs the config store that all of them reach.
struct LaunchOptions {
  int n_pes = 1;     // PEs this launcher starts
  int job_size = 0;  // PEs of the whole job; 0: n_pes
  int first_rank = 0;
  bool prefix_output = false;
  std::chrono::milliseconds job_timeout{0};  // 0: no limit
  std::chrono::milliseconds kill_grace{3000};
  std::string store_address;  // HOST:PORT the PEs connect to; empty: run_job runs a store
  // Where a store this launcher runs listens (port 0: any free one). PEs of this launcher reach
  // it at that address (127.0.0.1 for 0.0.0.0).
  std::string store_bind = "127.0.0.1";
  std::uint16_t store_port = 0;
  std::vector<std::string> command;
  std::string name = "shmoerun";  // what the launcher's own lines begin with
  TorchRendezvous torch;          // set by run_job (torch_env.hpp)
};

// Runs the job to its end and returns the launcher's exit status: 0 when every PE exited 0,
// else the first failing PE's status (128+signal for a signal), 124 on job timeout, 130 on
// Ctrl-C. A PE that fails stops the others, unless SHMOE_PE_LOSS=continue: then the others go
// on, and the last line names every PE that failed (the status is still the first one's). When it
// runs the store of a job with PEs elsewhere, the store stays up after this group ends until every
// PE of the job has finalized or the job was aborted.
int run_job(LaunchOptions options);

// Runs only the config store of a job of `job_size` PEs started by other launchers, until every
// PE has finalized or been lost (returns 0) or the job is aborted (prints the reason, returns
// 1); 124 on `timeout`, or when some PE has not said hello within `start_timeout` (0: no bound);
// 130 on Ctrl-C. Each PE's connection ends with its process, so once all came the store ends
// with the last of them.
int run_store_only(const std::string& bind_host, std::uint16_t port, int job_size,
                   std::chrono::milliseconds timeout, std::chrono::milliseconds start_timeout);

}  // namespace shmoe::tools
