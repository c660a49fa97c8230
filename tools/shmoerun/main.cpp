// shmoerun -n N [options] PROGRAM ARGS...: the oshrun of shmoe.
#include <cstdio>

#include "launcher.hpp"
#include "options.hpp"

int main(int argc, char** argv) {
  shmoe::tools::LaunchOptions options;
  if (int stop = shmoe::tools::parse_shmoerun_options(argc, argv, options); stop >= 0) return stop;
  try {
    return shmoe::tools::run_job(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shmoerun: %s\n", e.what());
    return 1;
  }
}
