// Reproducible random streams for generated inputs: every PE can regenerate any other PE's inputs
// (and any expert's weights) from the run's seed, which lets each PE compute its golden outputs
// without communication.
#pragma once

#include <cstdint>

#include "common/splitmix.hpp"

namespace shmoe::tools {

inline std::uint64_t mix(std::uint64_t x) {
  return splitmix64(x);
}

// One stream per (seed, owner, purpose); owner is a PE or an expert.
class Stream {
 public:
  Stream(std::uint64_t seed, int owner, int purpose)
      : state_(mix(seed ^ mix((std::uint64_t(owner) << 8) | std::uint64_t(purpose)))) {}
  std::uint64_t next() { return state_ = mix(state_); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }

 private:
  std::uint64_t state_;
};

}  // namespace shmoe::tools
