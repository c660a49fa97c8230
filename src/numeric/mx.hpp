// OCP Microscaling (MX) block formats MXFP8 E4M3 and E5M2: every block of 32 consecutive elements
// shares one E8M0 scale 2^(code - 127), and each element is an FP8 code of x / scale.
//
// Scale rule (OCP MX v1.0): scale exponent = floor(log2(amax)) - emax_elem, clamped to the E8M0
// range [-127, 127], with amax the block's largest magnitude and emax_elem 8 (E4M3) or 15 (E5M2).
// So the block's largest element lands in the element format's top binade [2^emax, 2^(emax+1)),
// where magnitudes past the largest finite element (448 or 57344) saturate to it.
//   - An all-zero block (zeros of either sign) gets the smallest scale, code 0 (2^-127).
//   - A block holding a NaN or an infinity gets the NaN scale 0xFF: E8M0 has no infinity and no
//     finite scale can represent one. Its element codes are then encode_fp8(x_i) unscaled; they
//     carry no meaning, as the whole block dequantises to NaN.
//   - A last block shorter than 32 (n not a multiple of 32) is scaled over its own elements.
// x_i / 2^scale is computed as x_i * 2^-scale, which is exact unless the product falls below the
// fp32 normal range; such values are far below half the smallest FP8 subnormal in either format,
// so they encode to (signed) zero exactly as the unrounded quotient would.
//
// Dequantisation decode_fp8(q_i) * 2^scale is exact for every code this library produces (and
// overflows to infinity only for foreign codes with huge scales).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "numeric/fp8.hpp"

namespace shmoe::numeric {

inline constexpr std::size_t kMxBlockSize = 32;
inline constexpr std::uint8_t kE8m0Nan = 0xff;

// Scales needed for n elements (one per started block).
constexpr std::size_t mx_num_blocks(std::size_t n) {
  return (n + kMxBlockSize - 1) / kMxBlockSize;
}

// E8M0 scale code for a block whose largest magnitude is |amax| (the sign of amax is ignored).
std::uint8_t e8m0_scale_code(float amax, Fp8Format f);

constexpr float e8m0_to_float(std::uint8_t code) {
  if (code == kE8m0Nan) return std::bit_cast<float>(0x7fc00000u);
  // 2^-127 is the one scale below the fp32 normal range: the subnormal with only bit 22 set.
  return code == 0 ? std::bit_cast<float>(0x00400000u)
                   : std::bit_cast<float>(std::uint32_t(code) << 23);
}

// Which implementation runs. kAuto picks the widest the CPU has (AVX-512F, AVX2, scalar); asking
// for one the CPU lacks runs the next narrower one. All give bit-identical results.
enum class MxKernel : std::uint8_t { kAuto, kScalar, kAvx2, kAvx512 };
bool mx_kernel_available(MxKernel k);

// codes[0..n) and scales[0..mx_num_blocks(n)). n may be any size (see the partial-block rule).
void quantize_mx(const float* x, std::size_t n, Fp8Format f, std::uint8_t* codes,
                 std::uint8_t* scales, MxKernel k = MxKernel::kAuto);
// Input as bfloat16 bit patterns (see half.hpp); same result as quantize_mx on the fp32 values.
void quantize_mx_bf16(const std::uint16_t* bf16_bits, std::size_t n, Fp8Format f,
                      std::uint8_t* codes, std::uint8_t* scales, MxKernel k = MxKernel::kAuto);
// A NaN scale turns its whole block into the quiet NaN 0x7fc00000; elements that are NaN codes
// become quiet NaNs of their own sign.
void dequantize_mx(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n,
                   Fp8Format f, float* out, MxKernel k = MxKernel::kAuto);
// The same values as bfloat16 bit patterns (float_to_bf16 of dequantize_mx's). Exact wherever
// the value is an fp32 normal: a code has at most 4 significant bits, bfloat16 holds 8.
void dequantize_mx_bf16(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n,
                        Fp8Format f, std::uint16_t* out, MxKernel k = MxKernel::kAuto);

// x rounded through MX FP8: what dequantize_mx (dequantize_mx_bf16) gives for quantize_mx's codes
// and scales, bit for bit, in one pass without them (where only the values are wanted: GEMM2's
// input in the MegaMoE layer).
void round_trip_mx(const float* x, std::size_t n, Fp8Format f, float* out,
                   MxKernel k = MxKernel::kAuto);
void round_trip_mx_bf16(const float* x, std::size_t n, Fp8Format f, std::uint16_t* out,
                        MxKernel k = MxKernel::kAuto);

}  // namespace shmoe::numeric
