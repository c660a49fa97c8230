// shmoerun's command line (installed as oshrun too): -n N (or -np N) [--prefix] [--timeout S]
// [host options] PROGRAM ARGS..., or --store-only -n N [--bind ADDR] [--port P]
// [--start-timeout S].
#pragma once

#include "launcher.hpp"

namespace shmoe::tools {

struct ShmoerunOptions {
  LaunchOptions launch;
  bool store_only = false;  // run only the config store of a job of launch.n_pes PEs
  // --store-only: how long every PE has to say hello before the store stops (0: no bound).
  std::chrono::milliseconds start_timeout{0};
};

// Fills `options` from argv. Returns -1 when the job (or the store) should run, otherwise the
// exit status (after printing the help, or an error naming the option and the value, to stderr).
int parse_shmoerun_options(int argc, char** argv, ShmoerunOptions& options);

}  // namespace shmoe::tools
