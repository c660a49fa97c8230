// shmoerun's command line: -n N [--prefix] [--timeout S] PROGRAM ARGS...
#pragma once

#include "launcher.hpp"

namespace shmoe::tools {

// Fills `options` from argv. Returns -1 when the job should run, otherwise the exit status
// (after printing the help, or an error naming the option and the value, to stderr).
int parse_shmoerun_options(int argc, char** argv, LaunchOptions& options);

}  // namespace shmoe::tools
