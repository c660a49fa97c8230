// 16-bit floating-point formats as bit patterns: bfloat16 and IEEE binary16, converted to and from
// fp32 with round-to-nearest-even; NaN stays NaN (quiet), infinities stay infinite.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace shmoe::numeric {

struct bf16 {
  std::uint16_t bits;
};
struct fp16 {
  std::uint16_t bits;
};

inline float bf16_to_float(bf16 v) {
  return std::bit_cast<float>(std::uint32_t(v.bits) << 16);
}

inline bf16 float_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
  // Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even.
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<std::uint16_t>(u >> 16)};
}

// float_to_bf16 over an array (AVX2 where the CPU has it; the same bits either way).
void floats_to_bf16(const float* x, std::size_t n, std::uint16_t* out);
// The same bits, stored past the cache (non-temporal stores, then a store fence) where out is
// 32-byte aligned: for rows another core reads after this one has moved on, which would
// otherwise cost a read for ownership of every line written.
void floats_to_bf16_streamed(const float* x, std::size_t n, std::uint16_t* out);

inline float fp16_to_float(fp16 v) {
  const std::uint32_t sign = std::uint32_t(v.bits & 0x8000u) << 16;
  const std::uint32_t exp = (v.bits >> 10) & 0x1fu;
  std::uint32_t mant = v.bits & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return std::bit_cast<float>(sign);
  // Subnormal: the value is mant * 2^-24, exact in fp32.
  float f = static_cast<float>(mant) * 0x1p-24f;
  return sign ? -f : f;
}

inline fp16 float_to_fp16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u)
    return {static_cast<std::uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu))};
  if (abs >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // rounds to inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): scale so the unit is 2^-24 and round to nearest even.
    float scaled = std::bit_cast<float>(abs) * 0x1p24f;
    std::uint32_t q = static_cast<std::uint32_t>(scaled);
    float rest = scaled - static_cast<float>(q);
    if (rest > 0.5f || (rest == 0.5f && (q & 1u))) ++q;
    return {static_cast<std::uint16_t>(sign | q)};
  }
  std::uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return {static_cast<std::uint16_t>(sign | (r >> 13))};
}

}  // namespace shmoe::numeric
