// Fuzzes shmoe-moe's command line parser (dispatch/combine, and the `mega` subcommand) on argv
// built from the input split at NUL bytes. shmoe-moe's main() catches nothing around them, so any
// exception escaping one is a finding (libFuzzer reports it as an abort). Accepted options are
// checked against what the parser promises the runner: values in their documented ranges and no
// case with more top-k slots than experts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "split_args.hpp"

namespace {

void check_accepted(const shmoe::tools::MoeRunOptions& o) {
  if (o.pes < 1 || o.pes > 64 || o.empty_pes < 0 || o.empty_pes > o.pes) std::abort();
  if (o.iterations < 1 || o.loops < 1 || o.warmup < 0) std::abort();
  if (!(o.drop >= 0 && o.drop <= 1) || !(o.timeout_s >= 1)) std::abort();
  if (o.max_recv_rows > shmoe::tools::kMaxReceivedRows) std::abort();
  if (o.delay_pe < -1 || o.delay_pe >= o.pes) std::abort();
  if (o.delay_pe >= 0 && (!o.perf || !(o.delay_us >= 1 && o.delay_us <= 1e6))) std::abort();
  if (o.shrink_ms < 0) std::abort();
  for (std::size_t i = 0; i < o.fail_pes.size(); ++i) {
    if (o.fail_pes[i] < 0 || o.fail_pes[i] >= o.pes) std::abort();
    if (i > 0 && o.fail_pes[i] <= o.fail_pes[i - 1]) std::abort();
  }
  if (!o.fail_pes.empty() &&
      (o.shrink_ms == 0 || o.perf || static_cast<int>(o.fail_pes.size()) >= o.pes ||
       o.fail_iteration < 0 || o.fail_iteration >= o.iterations))
    std::abort();
  for (const auto& c : o.cases) {
    if (c.bs < 0 || c.hidden < 1 || c.topk < 1 || c.experts_per_pe < 1) std::abort();
    if (c.topk > o.pes * c.experts_per_pe) std::abort();
  }
}

// What the MegaMoE runner relies on: the refusals of finish_mega_options happened.
void check_accepted(const shmoe::tools::MegaOptions& o) {
  if (o.pes < 1 || o.pes > 64 || o.tokens < 0 || o.ffn_dim % 2 != 0) std::abort();
  if (o.topk < 1 || o.topk > o.pes * o.experts_per_pe) std::abort();
  const bool default_workers = o.matrix_workers == 0 && o.vector_workers == 0;
  if (!default_workers && (o.matrix_workers < 1 || o.vector_workers != 2 * o.matrix_workers))
    std::abort();
  if (o.routing.empty_pes < 0 || o.routing.empty_pes > o.pes || o.loops < 1) std::abort();
  if (o.max_received_tokens > shmoe::tools::kMaxReceivedRows) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto args = shmoe::fuzz::split_at_nul("shmoe-moe", data, size);
  auto argv = shmoe::fuzz::argv_of(args);
  const int argc = static_cast<int>(args.size());
  shmoe::tools::MoeCommandLine parsed;
  if (shmoe::tools::parse_command_line(argc, argv.data(), parsed) >= 0) return 0;
  if (parsed.mega) {
    check_accepted(parsed.mega_options);
  } else {
    check_accepted(parsed.moe);
  }
  return 0;
}
