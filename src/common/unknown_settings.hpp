// SHMOE_*, SHMEM_* and SMA_* variables that are not shmoe settings (a misspelt SHMOE_TRANSPRT is
// otherwise ignored in silence): each named with the closest known name, if one is close.
// SHMOE_WARN_UNKNOWN_ENV=0 silences the warnings.
#pragma once

#include <string>
#include <vector>

namespace shmoe::settings {

// One variable of the environment that no part of shmoe reads.
struct UnknownVariable {
  std::string name;
  std::string closest;  // the known name within a few edits, or empty
};

// Those of this process's environment, sorted by name.
std::vector<UnknownVariable> unknown_variables();

// "SHMOE_TRANSPRT is not a shmoe setting and is ignored; did you mean SHMOE_TRANSPORT?"
std::string describe(const UnknownVariable& v);

// Each as a warning, once per process, unless SHMOE_WARN_UNKNOWN_ENV=0 (PE 0 calls this at init).
void warn_unknown_variables_once();

// Edit distance (insertions, deletions, substitutions) between two names.
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace shmoe::settings
