// The harness shmoe-moe's drivers share, as benchdnn's drivers share one. A driver is a call
// object that runs one case on this PE through the public API (generate, call, verify against
// its own reference, time, report) and returns the PE's status: CaseRun (run.cpp, dispatch and
// combine, one per shape of the sweep) and MegaRun (mega_run.cpp). The harness does what every
// driver needs alike: the seed every PE agrees on, the banner, the cases in order, and a refusal
// of the API ("PE N: refused: TEXT" on stderr, status 2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace shmoe::tools {

// PE 0's seed (a fresh random one if `requested` is 0), known to every PE. Collective.
std::uint64_t agree_on_seed(std::uint64_t requested);

// Agrees on the seed, has PE 0 print banner(seed), and runs cases 0..n_cases-1 as
// run_case(index, seed). Returns the statuses or'ed together, or 2 once the API refused a case
// (the other cases still run). Collective.
int run_driver(std::uint64_t requested_seed,
               const std::function<std::string(std::uint64_t)>& banner, std::size_t n_cases,
               const std::function<int(std::size_t, std::uint64_t)>& run_case);

}  // namespace shmoe::tools
