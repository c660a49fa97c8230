// The MX scale rules every kernel of numeric/mx shares (scalar, AVX2, AVX-512): one definition,
// so that the kernels cannot drift apart. Internal to src/numeric.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "numeric/mx.hpp"

namespace shmoe::numeric::mx_rules {

constexpr std::uint32_t kAbsMask = 0x7fffffffu;
constexpr std::uint32_t kInfBits = 0x7f800000u;
constexpr std::uint32_t kQuietNan = 0x7fc00000u;

// floor(log2) of a normal fp32 is its exponent field minus 127, so the code
// floor(log2 amax) - emax + 127 is the field minus emax, at most 254 - emax. Zero and fp32
// subnormals (field 0) lie below 2^-126, where the clamp gives code 0 anyway.
constexpr std::uint8_t scale_code_from_abs_bits(std::uint32_t abs_bits, Fp8Format f) {
  if (abs_bits >= kInfBits) return kE8m0Nan;
  return static_cast<std::uint8_t>(
      std::max(static_cast<int>(abs_bits >> 23) - fp8_spec(f).emax, 0));
}

// The multiplier 2^(127 - code). Those codes stay at or below 254 - 8, so it is a normal fp32. The
// NaN scale multiplies by one, which keeps its block's NaNs and infinities in the codes.
constexpr float inverse_scale(std::uint8_t code) {
  return code == kE8m0Nan ? 1.0f : std::bit_cast<float>(std::uint32_t(254 - code) << 23);
}

}  // namespace shmoe::numeric::mx_rules
