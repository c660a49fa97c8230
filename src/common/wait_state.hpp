// What one blocking wait waits for, in the fields a hang report needs: the call, the PE the
// data should come from, the value wanted and the value seen, the call's generation. Built only
// when somebody asks (a hang report), never on a wait's fast path.
#pragma once

#include <cstdint>
#include <string>

namespace shmoe {

struct WaitState {
  std::string op;      // the call waiting: "barrier", "shmem_long_wait_until", "combine entry"
  std::string detail;  // the human sentence: where the word is, which round, what is missing
  int peer = -1;       // the PE whose write would end the wait; -1: unknown, or any of several
  std::uint64_t expected = 0;    // the value the wait needs (for comparisons, the bound)
  std::uint64_t seen = 0;        // the value it last saw
  std::uint64_t generation = 0;  // which call of `op` (barrier number, operator generation)
};

}  // namespace shmoe
