// Fuzzes shmoe-moe's command line parser on argv built from the input split at NUL bytes.
// shmoe-moe's main() catches nothing around parse_moe_options, so any exception escaping it is a
// finding (libFuzzer reports it as an abort). Accepted options are checked against what the
// parser promises the runner: values in their documented ranges and no case with more top-k
// slots than experts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "options.hpp"
#include "split_args.hpp"

namespace {

void check_accepted(const shmoe::tools::MoeRunOptions& o) {
  if (o.pes < 1 || o.pes > 64 || o.empty_pes < 0 || o.empty_pes > o.pes) std::abort();
  if (o.iterations < 1 || o.loops < 1 || o.warmup < 0) std::abort();
  if (!(o.drop >= 0 && o.drop <= 1) || !(o.timeout_s >= 1)) std::abort();
  for (const auto& c : o.cases) {
    if (c.bs < 0 || c.hidden < 1 || c.topk < 1 || c.experts_per_pe < 1) std::abort();
    if (c.topk > o.pes * c.experts_per_pe) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto args = shmoe::fuzz::split_at_nul("shmoe-moe", data, size);
  auto argv = shmoe::fuzz::argv_of(args);
  shmoe::tools::MoeRunOptions options;
  int stop = shmoe::tools::parse_moe_options(static_cast<int>(args.size()), argv.data(), options);
  if (stop < 0) check_accepted(options);
  return 0;
}
