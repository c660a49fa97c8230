// FP8 E4M3 with one fp32 scale per block of channels (DeepEP's per-token, per-128-channel cast):
// each block's scale is amax / 448 with amax at least 1e-4 (so an all-zero block stays finite),
// and each element is encode_fp8(x * 448 / amax). With pow2_scale the scale is rounded up to a
// power of two, 2^ceil(log2(amax / 448)), so that it fits an E8M0 (UE8M0) byte exactly.
// Decoding, decode_fp8(code) * scale, is what the receiver does; E4M3 values are exact in bf16.
#pragma once

#include <cstddef>
#include <cstdint>

#include "numeric/mx.hpp"

namespace shmoe::numeric {

inline constexpr float kFp8BlockAmaxFloor = 1e-4f;

// Quantizes n bf16 values (bit patterns) in blocks of `block` (n a multiple of block):
// codes[0..n), scales[0..n / block). NaNs do not count towards amax (as fmax leaves them out).
// kAuto uses AVX-512 where the CPU has it (kAvx2 runs the scalar code); the same bits either way.
void quantize_fp8_blocks_bf16(const std::uint16_t* bf16_bits, std::size_t n, std::size_t block,
                              bool pow2_scale, std::uint8_t* codes, float* scales,
                              MxKernel kernel = MxKernel::kAuto);

// E4M3 codes to the bf16 bit patterns of the same values (exact); kernels as above.
void fp8_e4m3_to_bf16(const std::uint8_t* codes, std::size_t n, std::uint16_t* bf16_bits,
                      MxKernel kernel = MxKernel::kAuto);

}  // namespace shmoe::numeric
