// The AVX-512 kernels of numeric/mx, for whole 32-element blocks: the caller runs the scalar code
// on a partial last block. Each returns how many elements it handled: n rounded down to whole
// blocks, or 0 where the CPU lacks AVX-512BW. Same operations as the scalar and AVX2 code, on 16
// lanes, hence the same bits. Internal to src/numeric.
#pragma once

#include <cstddef>
#include <cstdint>

#include "numeric/fp8.hpp"

namespace shmoe::numeric::mx_avx512 {

bool available();
std::size_t quantize(const float* x, std::size_t n, Fp8Format f, std::uint8_t* codes,
                     std::uint8_t* scales);
std::size_t quantize(const std::uint16_t* bf16_bits, std::size_t n, Fp8Format f,
                     std::uint8_t* codes, std::uint8_t* scales);
std::size_t dequantize(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n,
                       Fp8Format f, float* out);
std::size_t dequantize_bf16(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n,
                            Fp8Format f, std::uint16_t* out);

// quantize then dequantize (dequantize_bf16), without the codes.
std::size_t round_trip(const float* x, std::size_t n, Fp8Format f, float* out);
std::size_t round_trip_bf16(const float* x, std::size_t n, Fp8Format f, std::uint16_t* out);

// For numeric/fp8_blocks, over the first n rounded down to 16 bf16 values (0 without AVX-512F):
// the largest magnitude that is not a NaN (*amax, left as it is where larger), and the E4M3
// codes of x_i * mul. Each returns how many values it handled.
std::size_t abs_max_bf16(const std::uint16_t* bf16_bits, std::size_t n, float* amax);
std::size_t encode_e4m3_scaled_bf16(const std::uint16_t* bf16_bits, std::size_t n, float mul,
                                    std::uint8_t* codes);
// E4M3 codes to the bf16 bits of their values (exact), over the first n rounded down to 16.
std::size_t e4m3_to_bf16(const std::uint8_t* codes, std::size_t n, std::uint16_t* bf16_bits);

}  // namespace shmoe::numeric::mx_avx512
