// What the MoE tests of the public API share: bfloat16 bit patterns of exactly representable
// values, the operators' rounding (to nearest, ties to even) for the reference, and an
// operator's error text.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "shmoe/moe.hpp"

namespace shmoe::test {

inline std::uint16_t bf16_bits(float v) {  // exact for values of at most 8 bits of mantissa
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  return static_cast<std::uint16_t>(b >> 16);
}
inline float from_bf16(std::uint16_t h) {
  const std::uint32_t b = std::uint32_t{h} << 16;
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}
inline std::uint16_t round_to_bf16(float v) {  // round to nearest, ties to even
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  return static_cast<std::uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
}

// The shmoe::Error f() throws, or "".
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace shmoe::test
