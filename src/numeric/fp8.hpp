// 8-bit floating point of the OCP "8-bit Floating Point Specification (OFP8)" as plain byte codes:
// E4M3 (the "FN" variant: no infinities, one NaN per sign) and E5M2 (IEEE-like). Decoding to fp32
// is exact. Encoding from fp32 rounds to nearest, ties to even, and saturates: a finite value
// beyond the largest finite code becomes that code, never infinity or NaN.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace shmoe::numeric {

enum class Fp8Format : std::uint8_t { kE4M3, kE5M2 };

// The parameters of a format that the conversions need; everything else follows from them.
struct Fp8Spec {
  int mant_bits;
  int bias;
  int emax;               // exponent of the top binade; OCP MX calls it emax_elem
  std::uint8_t max_code;  // largest finite magnitude
  std::uint8_t nan_code;  // the NaN written for NaN input (sign bit clear)
  float max_value;
};

constexpr Fp8Spec fp8_spec(Fp8Format f) {
  // E4M3 gives up infinities so that S.1111.000 to S.1111.110 are finite: max is 1.75 * 2^8.
  return f == Fp8Format::kE4M3 ? Fp8Spec{3, 7, 8, 0x7e, 0x7f, 448.0f}
                               : Fp8Spec{2, 15, 15, 0x7b, 0x7e, 57344.0f};
}

constexpr bool fp8_is_nan(std::uint8_t code, Fp8Format f) {
  const unsigned mag = code & 0x7fu;
  return f == Fp8Format::kE4M3 ? mag == 0x7fu : mag > 0x7cu;
}

constexpr float decode_fp8(std::uint8_t code, Fp8Format f) {
  const Fp8Spec s = fp8_spec(f);
  const std::uint32_t sign = std::uint32_t(code & 0x80u) << 24;
  const std::uint32_t mag = code & 0x7fu;
  if (fp8_is_nan(code, f)) return std::bit_cast<float>(sign | 0x7fc00000u);
  if (f == Fp8Format::kE5M2 && mag == 0x7cu) return std::bit_cast<float>(sign | 0x7f800000u);
  const std::uint32_t exp = mag >> s.mant_bits;
  const std::uint32_t mant = mag & ((1u << s.mant_bits) - 1u);
  if (exp == 0) {
    // Subnormal: mant units of 2^(1 - bias - mant_bits), a normal fp32 power of two.
    const float unit = std::bit_cast<float>(std::uint32_t(128 - s.bias - s.mant_bits) << 23);
    const float v = static_cast<float>(mant) * unit;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 127u - s.bias) << 23) | (mant << (23 - s.mant_bits)));
}

// Infinity: E5M2 keeps it; E4M3 has none, and we saturate it to +-448 like any other overflow
// (rather than NaN) so that an overflowed activation stays a large number of the right sign.
constexpr std::uint8_t encode_fp8(float x, Fp8Format f) {
  const Fp8Spec s = fp8_spec(f);
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | s.nan_code;
  if (abs == 0x7f800000u && f == Fp8Format::kE5M2) return sign | 0x7cu;
  // Below max, rounding up reaches at most max, so everything from max on saturates.
  if (abs >= std::bit_cast<std::uint32_t>(s.max_value)) return sign | s.max_code;
  if (abs < (std::uint32_t(128 - s.bias) << 23)) {
    // Subnormal result. The ulp of `magic` in fp32 is exactly the fp8 subnormal step, so the fp32
    // addition does the round-to-nearest-even; a carry to the smallest normal yields its code.
    const float magic = std::bit_cast<float>(std::uint32_t(151 - s.bias - s.mant_bits) << 23);
    const float sum = std::bit_cast<float>(abs) + magic;
    return sign | static_cast<std::uint8_t>(std::bit_cast<std::uint32_t>(sum) -
                                            std::bit_cast<std::uint32_t>(magic));
  }
  // Normal result: rebias the exponent, then round the dropped mantissa bits to nearest even; a
  // mantissa carry correctly bumps the exponent.
  const int shift = 23 - s.mant_bits;
  std::uint32_t r = abs - (std::uint32_t(127 - s.bias) << 23);
  r += (1u << (shift - 1)) - 1u + ((r >> shift) & 1u);
  return sign | static_cast<std::uint8_t>(r >> shift);
}

// decode_fp8 of every code, for loops where a load beats the branches.
const std::array<float, 256>& fp8_decode_table(Fp8Format f);

}  // namespace shmoe::numeric
