#include "numeric/fp8_blocks.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "numeric/fp8.hpp"
#include "numeric/half.hpp"

namespace shmoe::numeric {
namespace {

constexpr float kE4m3Max = 448.0f;

// 2^ceil(log2(v)) for a positive normal v, from its bits (a power of two stays itself).
float pow2_ceil(float v) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(v);
  std::uint32_t exp = (u >> 23) & 0xffu;
  if (u & 0x7fffffu) ++exp;
  return std::bit_cast<float>(exp << 23);
}

}  // namespace

void quantize_fp8_blocks_bf16(const std::uint16_t* bf16_bits, std::size_t n, std::size_t block,
                              bool pow2_scale, std::uint8_t* codes, float* scales) {
  for (std::size_t b = 0; b * block < n; ++b) {
    const std::uint16_t* in = bf16_bits + b * block;
    float amax = kFp8BlockAmaxFloor;
    for (std::size_t i = 0; i < block; ++i)
      amax = std::max(amax, std::fabs(bf16_to_float(bf16{in[i]})));
    // The scale a receiver multiplies by, and the factor that maps amax onto 448.
    float scale = amax * (1.0f / kE4m3Max);
    float inverse = kE4m3Max / amax;
    if (pow2_scale) {
      scale = pow2_ceil(scale);
      inverse = 1.0f / scale;  // exact: scale is a power of two
    }
    scales[b] = scale;
    for (std::size_t i = 0; i < block; ++i)
      codes[b * block + i] = encode_fp8(bf16_to_float(bf16{in[i]}) * inverse, Fp8Format::kE4M3);
  }
}

void fp8_e4m3_to_bf16(const std::uint8_t* codes, std::size_t n, std::uint16_t* bf16_bits) {
  const auto& table = fp8_decode_table(Fp8Format::kE4M3);
  for (std::size_t i = 0; i < n; ++i)
    bf16_bits[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(table[codes[i]]) >> 16);
}

}  // namespace shmoe::numeric
