// What the multi-PE tests share: a random seed that every PE agrees on, value encodings that name
// their source, and a GoogleTest main that runs inside every PE.
#pragma once

#include <shmem.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/splitmix.hpp"

namespace shmoe::test {

// A fresh seed per run, the same on every PE (PE 0 draws it and puts it everywhere).
std::uint64_t shared_seed();

// Whether PE pe should be able to map this PE's heap, worked out from the environment the test
// was started with, not from the library: PEs with the same host (SHMOE_HOST_ID, else the
// hostname) share memory unless SHMOE_TRANSPORT=ucx, which keeps only this PE. Collective.
std::vector<bool> expected_shared_memory_pes();

inline std::uint64_t mix(std::uint64_t x) {
  return splitmix64(x);
}

// A value of type T that encodes (seed, source PE, destination PE, index), exactly representable
// in T, so a wrong source, destination or slot shows as a wrong value.
template <typename T>
T encode(std::uint64_t seed, int src, int dst, std::size_t i) {
  std::uint64_t h = mix(seed ^ mix((std::uint64_t(src) << 48) ^ (std::uint64_t(dst) << 32) ^ i));
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(static_cast<std::int32_t>(h & 0xFFFFFF) - 0x800000) / T(8);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(h);
  } else {
    T v;
    std::uint64_t words[2] = {h, mix(h)};
    static_assert(sizeof(T) <= sizeof(words));
    std::memcpy(&v, words, sizeof(T));
    return v;
  }
}

template <typename T>
bool same(const T& a, const T& b) {
  if constexpr (std::is_floating_point_v<T> && sizeof(T) > 8) {
    return a == b;  // long double has padding bytes that need not match
  } else {
    return std::memcmp(&a, &b, sizeof(T)) == 0;
  }
}

}  // namespace shmoe::test
