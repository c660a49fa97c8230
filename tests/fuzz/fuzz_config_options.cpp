// Fuzzes shmoe-config's command line parser on argv built from the input split at NUL bytes. An
// exception escaping the parser is a finding; an accepted command line asks for something, with
// --pes in its range.
#include <cstdlib>

#include "options.hpp"
#include "split_args.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto args = shmoe::fuzz::split_at_nul("shmoe-config", data, size);
  auto argv = shmoe::fuzz::argv_of(args);
  shmoe::tools::config::Request q;
  q.pes = 4;
  if (shmoe::tools::config::parse_config_options(static_cast<int>(args.size()), argv.data(),
                                                 "0.0.0", q) < 0) {
    if (!(q.prefix || q.cflags || q.libs || q.env || q.diagnose) || q.pes < 1 ||
        q.pes > (1 << 16)) {
      std::abort();
    }
  }
  return 0;
}
