// Amounts of memory: sums and products that saturate instead of wrapping (a shape that needs
// more than 2^64 bytes must compare as too much, not as a small number that fits), and their
// text for people ("512.0 MiB").
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace shmoe {

inline constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

constexpr std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return a > std::numeric_limits<std::uint64_t>::max() - b
             ? std::numeric_limits<std::uint64_t>::max()
             : a + b;
}

constexpr std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  return a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a
             ? std::numeric_limits<std::uint64_t>::max()
             : a * b;
}

// "512.0 MiB", "1.5 GiB", "12 B".
std::string human_bytes(std::uint64_t bytes);

}  // namespace shmoe
