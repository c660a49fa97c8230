// One PE's part of `shmoe-moe mega`: generate inputs and weights, run MegaMoE, verify, time,
// trace.
#pragma once

#include <cstddef>

#include "mega_options.hpp"

namespace shmoe::tools {

int run_mega_pe(const MegaOptions& options);

// Symmetric heap bytes a PE needs (what shmoe-moe mega sets by default).
std::size_t mega_symmetric_bytes(const MegaOptions& options);

}  // namespace shmoe::tools
