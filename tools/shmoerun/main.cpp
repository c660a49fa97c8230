// shmoerun -n N [options] PROGRAM ARGS...: the oshrun of shmoe.
#include <cstdio>

#include "launcher.hpp"
#include "options.hpp"

int main(int argc, char** argv) {
  shmoe::tools::ShmoerunOptions options;
  if (int stop = shmoe::tools::parse_shmoerun_options(argc, argv, options); stop >= 0) return stop;
  const auto& o = options.launch;
  try {
    if (options.store_only) {
      return shmoe::tools::run_store_only(o.store_bind, o.store_port, o.n_pes, o.job_timeout,
                                          options.start_timeout);
    }
    return shmoe::tools::run_job(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shmoerun: %s\n", e.what());
    return 1;
  }
}
