#include "numeric/fp8_blocks.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "numeric/fp8.hpp"
#include "numeric/half.hpp"
#include "numeric/mx_avx512.hpp"

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
                              bool pow2_scale, std::uint8_t* codes, float* scales,
                              MxKernel kernel) {
  const bool wide = kernel == MxKernel::kAuto || kernel == MxKernel::kAvx512;
  for (std::size_t b = 0; b * block < n; ++b) {
    const std::uint16_t* in = bf16_bits + b * block;
    std::uint8_t* out = codes + b * block;
    float amax = kFp8BlockAmaxFloor;
    std::size_t i = wide ? mx_avx512::abs_max_bf16(in, block, &amax) : 0;
    for (; i < block; ++i) amax = std::fmax(amax, std::fabs(bf16_to_float(bf16{in[i]})));
    // The scale a receiver multiplies by, and the factor that maps amax onto 448.
    float scale = amax * (1.0f / kE4m3Max);
    float inverse = kE4m3Max / amax;
    if (pow2_scale) {
      scale = pow2_ceil(scale);
      inverse = 1.0f / scale;  // exact: scale is a power of two
    }
    scales[b] = scale;
    i = wide ? mx_avx512::encode_e4m3_scaled_bf16(in, block, inverse, out) : 0;
    for (; i < block; ++i)
      out[i] = encode_fp8(bf16_to_float(bf16{in[i]}) * inverse, Fp8Format::kE4M3);
  }
}

void fp8_e4m3_to_bf16(const std::uint8_t* codes, std::size_t n, std::uint16_t* bf16_bits,
                      MxKernel kernel) {
  const bool wide = kernel == MxKernel::kAuto || kernel == MxKernel::kAvx512;
  std::size_t i = wide ? mx_avx512::e4m3_to_bf16(codes, n, bf16_bits) : 0;
  const auto& table = fp8_decode_table(Fp8Format::kE4M3);
  for (; i < n; ++i)
    bf16_bits[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(table[codes[i]]) >> 16);
}

}  // namespace shmoe::numeric
