// Fuzzes shmoerun's command line parser on argv built from the input split at NUL bytes. An
// exception escaping the parser is a finding; an accepted command line must give what run_job
// relies on: a PE count in range, a program (none with --store-only), a non-negative timeout.
#include <cstdlib>

#include "options.hpp"
#include "split_args.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto args = shmoe::fuzz::split_at_nul("shmoerun", data, size);
  auto argv = shmoe::fuzz::argv_of(args);
  shmoe::tools::ShmoerunOptions parsed;
  if (shmoe::tools::parse_shmoerun_options(static_cast<int>(args.size()), argv.data(), parsed) <
      0) {
    const auto& o = parsed.launch;
    if (o.n_pes < 1 || o.n_pes > 1024 || o.job_timeout.count() < 0 ||
        o.command.empty() != parsed.store_only) {
      std::abort();
    }
  }
  return 0;
}
