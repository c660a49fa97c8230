// splitmix64's finaliser: a cheap, well-mixed 64-bit hash. The tests and tools build reproducible
// data from it (every PE can compute any other PE's values from a seed); nothing in the library
// depends on it.
#pragma once

#include <cstdint>

namespace shmoe {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace shmoe
