// shmoe-moe: starts its own PEs (no launcher step), each of which generates inputs, runs the MoE
// operators, verifies every output and, with --perf, writes CSVs. `shmoe-moe mega ...` does the
// same for the fused MegaMoE layer.
#include <fmt/format.h>
#include <shmem.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "launcher.hpp"
#include "mega_options.hpp"
#include "mega_run.hpp"
#include "options.hpp"
#include "run.hpp"

namespace {

// In a PE (started by this same program): initialise SHMEM, run, finalise.
template <typename Run>
int run_as_pe(Run&& run) {
  int provided = 0;
  shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);
  const int status = run();
  shmem_finalize();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const bool mega = argc > 1 && std::string(argv[1]) == "mega";
  shmoe::tools::MoeRunOptions options;
  shmoe::tools::MegaOptions mega_options;
  if (mega) {
    if (int stop = shmoe::tools::parse_mega_options(argc, argv, mega_options); stop >= 0)
      return stop;
  } else if (int stop = shmoe::tools::parse_moe_options(argc, argv, options); stop >= 0) {
    return stop;
  }

  if (std::getenv("SHMOE_MOE_PE") != nullptr) {
    return mega ? run_as_pe([&] { return shmoe::tools::run_mega_pe(mega_options); })
                : run_as_pe([&] { return shmoe::tools::run_moe_pe(options); });
  }

  shmoe::tools::LaunchOptions launch;
  launch.n_pes = mega ? mega_options.pes : options.pes;
  const double timeout_s = mega ? mega_options.routing.timeout_s : options.timeout_s;
  launch.job_timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  launch.command.push_back(n > 0 ? std::string(self, static_cast<std::size_t>(n)) : argv[0]);
  for (int i = 1; i < argc; ++i) launch.command.push_back(argv[i]);
  ::setenv("SHMOE_MOE_PE", "1", 1);
  if (std::getenv("SHMEM_SYMMETRIC_SIZE") == nullptr) {
    ::setenv("SHMEM_SYMMETRIC_SIZE",
             std::to_string(mega ? shmoe::tools::mega_symmetric_bytes(mega_options)
                                 : shmoe::tools::symmetric_bytes_needed(options))
                 .c_str(),
             1);
  }
  try {
    return shmoe::tools::run_job(launch);
  } catch (const std::exception& e) {
    fmt::print(stderr, "shmoe-moe: {}\n", e.what());
    return 1;
  }
}
