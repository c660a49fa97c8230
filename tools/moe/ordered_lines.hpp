// The result lines of a dispatch/combine case: PE 0 prints every PE's in PE order, then one
// summary line (as mega's), instead of each PE printing its own in whatever order they finish.
#pragma once

#include <string>

namespace shmoe::tools {

// Collective over every PE of the job (all must be alive: not under --fail-pe). `line` is this
// PE's line without its newline; `passed` its verdict; `what` names the case in the summary.
void print_in_pe_order(const std::string& line, bool passed, const std::string& what);

}  // namespace shmoe::tools
