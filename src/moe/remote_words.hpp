// Shrink mode's reads of one word in the other PEs' windows that a stopped PE cannot hold up:
// the beats, the combine's read-mask records and the rejoin's outcome records.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "moe/protocol.hpp"

namespace shmoe::moe {

// Word `word` (a symmetric address) at each PE for which want[pe]: by a load where that PE's
// window is mapped here, else by a detached get given up on at a quarter of the bound (a PE
// stopped on another host answers none until it resumes; this PE's beat moves meanwhile).
// nullopt where a get went unanswered or failed (a lost PE). `what` names the wait in hang
// reports.
std::vector<std::optional<std::uint64_t>> read_remote_words(const LiveSet& live,
                                                            std::uint64_t* word,
                                                            const std::vector<bool>& want,
                                                            const std::string& what);

}  // namespace shmoe::moe
