// shmoe-moe: starts its own PEs (no launcher step), each of which generates inputs, runs the MoE
// operators, verifies every output and, with --perf, writes CSVs.
#include <fmt/format.h>
#include <shmem.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "launcher.hpp"
#include "options.hpp"
#include "run.hpp"

int main(int argc, char** argv) {
  shmoe::tools::MoeRunOptions options;
  if (int stop = shmoe::tools::parse_moe_options(argc, argv, options); stop >= 0) return stop;

  if (std::getenv("SHMOE_MOE_PE") != nullptr) {
    int provided = 0;
    shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);
    int status = shmoe::tools::run_moe_pe(options);
    shmem_finalize();
    return status;
  }

  shmoe::tools::LaunchOptions launch;
  launch.n_pes = options.pes;
  launch.job_timeout = std::chrono::milliseconds(static_cast<long long>(options.timeout_s * 1000));
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  launch.command.push_back(n > 0 ? std::string(self, static_cast<std::size_t>(n)) : argv[0]);
  for (int i = 1; i < argc; ++i) launch.command.push_back(argv[i]);
  ::setenv("SHMOE_MOE_PE", "1", 1);
  if (std::getenv("SHMEM_SYMMETRIC_SIZE") == nullptr) {
    ::setenv("SHMEM_SYMMETRIC_SIZE",
             std::to_string(shmoe::tools::symmetric_bytes_needed(options)).c_str(), 1);
  }
  try {
    return shmoe::tools::run_job(launch);
  } catch (const std::exception& e) {
    fmt::print(stderr, "shmoe-moe: {}\n", e.what());
    return 1;
  }
}
