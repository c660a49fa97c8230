// One PE's part of a shmoe-moe run: generate, run, verify, time, report.
#pragma once

#include <cstddef>
#include <cstdint>

#include "options.hpp"

namespace shmoe::tools {

// Returns the PE's exit status: 0 when every output verified.
int run_moe_pe(const MoeRunOptions& options);

// Symmetric heap bytes a PE needs for one case, and for the largest case (what shmoe-moe sets by
// default).
std::size_t symmetric_bytes_for(const MoeRunOptions& options, const MoeCase& c);
std::size_t symmetric_bytes_needed(const MoeRunOptions& options);

}  // namespace shmoe::tools
