// The soak test's shared state. Every operation is collective, so every PE must make the same
// choices in the same order: those come from `rng`, seeded identically on every PE. What differs
// per PE (data, targets of atomics) comes from `hash`, which any PE can evaluate for any other
// PE, so each PE computes the exact expected result of every step locally.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "common/splitmix.hpp"

namespace shmoe::soak {

inline std::uint64_t mix(std::uint64_t x) {
  return splitmix64(x);
}

struct Soak {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  int me = 0;
  int n = 1;
  std::mt19937_64 rng;

  // Uniform in [lo, hi], the same on every PE.
  std::uint64_t draw(std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  }
  // A value tied to this step and its arguments, the same whichever PE computes it.
  std::uint64_t hash(std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0) const {
    return mix(seed ^ mix(step ^ mix(a ^ mix(b ^ mix(c)))));
  }
  // Names the seed, the step and the operation so the run can be replayed with SOAK_SEED, then
  // ends the whole job.
  [[noreturn]] void fail(const std::string& op, const std::string& what) const;
};

// Each runs one randomly shaped instance of its operation, collectively, and checks it.
void step_put(Soak& s);
void step_get(Soak& s);
void step_atomics(Soak& s);
void step_barriers(Soak& s);
void step_moe(Soak& s);

// Symmetric buffers the RMA steps share, allocated once (collectively) before the loop.
void init_rma_buffers();
void free_rma_buffers();

}  // namespace shmoe::soak
