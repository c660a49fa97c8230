#include "numeric/mx_avx512.hpp"

#include <bit>

#include "common/cpu_features.hpp"
#include "numeric/mx_rules.hpp"

#if defined(__x86_64__) || defined(__i386__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), an uninitialised variable by
// design, which -Wmaybe-uninitialized reports once they are inlined here.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define SHMOE_MX_AVX512 1
#define SHMOE_AVX512 __attribute__((target("avx512f")))
#endif

namespace shmoe::numeric::mx_avx512 {

#ifdef SHMOE_MX_AVX512

namespace {

using namespace mx_rules;

SHMOE_AVX512 inline __m512i splat(std::uint32_t v) {
  return _mm512_set1_epi32(static_cast<int>(v));
}

SHMOE_AVX512 inline __m512 load16(const float* p) {
  return _mm512_loadu_ps(p);
}
SHMOE_AVX512 inline __m512 load16(const std::uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// encode_fp8 on 16 lanes: numeric/mx.cpp's encode8, step for step.
template <Fp8Format F>
SHMOE_AVX512 inline __m512i encode16(__m512 x) {
  constexpr Fp8Spec s = fp8_spec(F);
  constexpr int shift = 23 - s.mant_bits;
  const __m512i u = _mm512_castps_si512(x);
  const __m512i abs = _mm512_and_si512(u, splat(kAbsMask));
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 24), splat(0x80));

  __m512i r = _mm512_sub_epi32(abs, splat(std::uint32_t(127 - s.bias) << 23));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(r, shift), splat(1));
  r = _mm512_add_epi32(r, _mm512_add_epi32(lsb, splat((1u << (shift - 1)) - 1u)));
  __m512i code = _mm512_srli_epi32(r, shift);

  const __m512 magic = _mm512_castsi512_ps(splat(std::uint32_t(151 - s.bias - s.mant_bits) << 23));
  const __m512i sub =
      _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(abs), magic)),
                       _mm512_castps_si512(magic));
  code = _mm512_mask_blend_epi32(
      _mm512_cmpgt_epi32_mask(splat(std::uint32_t(128 - s.bias) << 23), abs), code, sub);
  const std::uint32_t max_bits = std::bit_cast<std::uint32_t>(s.max_value);
  code = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(abs, splat(max_bits - 1)), code,
                                 splat(s.max_code));
  if constexpr (F == Fp8Format::kE5M2) {
    code =
        _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(abs, splat(kInfBits)), code, splat(0x7c));
  }
  code = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(abs, splat(kInfBits)), code,
                                 splat(s.nan_code));
  return _mm512_or_si512(code, sign);
}

// decode_fp8 on 16 lanes: numeric/mx.cpp's decode8, step for step.
template <Fp8Format F>
SHMOE_AVX512 inline __m512 decode16(const std::uint8_t* codes) {
  constexpr Fp8Spec s = fp8_spec(F);
  const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  const __m512i mag = _mm512_and_si512(c, splat(0x7f));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(c, splat(0x80)), 24);
  const __m512i normal = _mm512_add_epi32(_mm512_slli_epi32(mag, 23 - s.mant_bits),
                                          splat(std::uint32_t(127 - s.bias) << 23));
  const __m512 step = _mm512_castsi512_ps(splat(std::uint32_t(128 - s.bias - s.mant_bits) << 23));
  const __m512i sub = _mm512_castps_si512(_mm512_mul_ps(_mm512_cvtepi32_ps(mag), step));
  __m512i v =
      _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(splat(1u << s.mant_bits), mag), normal, sub);
  if constexpr (F == Fp8Format::kE4M3) {
    v = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(mag, splat(0x7f)), v, splat(kQuietNan));
  } else {
    v = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(mag, splat(0x7c)), v, splat(kInfBits));
    v = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(mag, splat(0x7c)), v, splat(kQuietNan));
  }
  return _mm512_castsi512_ps(_mm512_or_si512(v, sign));
}

// float_to_bf16 (numeric/half.hpp) on 16 lanes.
SHMOE_AVX512 inline __m256i to_bf16_16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), splat(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, splat(0x7fffu))), 16);
  const __m512i quiet_nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), splat(0x40u));
  const __mmask16 is_nan =
      _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, splat(kAbsMask)), splat(kInfBits));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, quiet_nan));
}

template <Fp8Format F, typename T>
SHMOE_AVX512 std::size_t quantize_blocks(const T* x, std::size_t n, std::uint8_t* codes,
                                         std::uint8_t* scales) {
  const std::size_t full = n / kMxBlockSize * kMxBlockSize;
  for (std::size_t i = 0; i < full; i += kMxBlockSize) {
    const __m512 v0 = load16(x + i), v1 = load16(x + i + 16);
    const __m512i amax =
        _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(v0), splat(kAbsMask)),
                         _mm512_and_si512(_mm512_castps_si512(v1), splat(kAbsMask)));
    const std::uint8_t scale = scale_code_from_abs_bits(_mm512_reduce_max_epu32(amax), F);
    scales[i / kMxBlockSize] = scale;
    const __m512 mul = _mm512_set1_ps(inverse_scale(scale));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i),
                     _mm512_cvtepi32_epi8(encode16<F>(_mm512_mul_ps(v0, mul))));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i + 16),
                     _mm512_cvtepi32_epi8(encode16<F>(_mm512_mul_ps(v1, mul))));
  }
  return full;
}

SHMOE_AVX512 inline void store16(float* out, __m512 v) {
  _mm512_storeu_ps(out, v);
}
SHMOE_AVX512 inline void store16(std::uint16_t* out, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), to_bf16_16(v));
}

// fp32 or bf16 values of the whole blocks; a NaN scale gives the fixed quiet NaN, as the scalar
// code does.
template <Fp8Format F, typename Out>
SHMOE_AVX512 std::size_t dequantize_blocks(const std::uint8_t* codes, const std::uint8_t* scales,
                                           std::size_t n, Out* out) {
  const std::size_t full = n / kMxBlockSize * kMxBlockSize;
  for (std::size_t i = 0; i < full; i += kMxBlockSize) {
    const std::uint8_t scale = scales[i / kMxBlockSize];
    if (scale == kE8m0Nan) {
      const __m512 nan = _mm512_castsi512_ps(splat(kQuietNan));
      store16(out + i, nan);
      store16(out + i + 16, nan);
      continue;
    }
    const __m512 s = _mm512_set1_ps(e8m0_to_float(scale));
    store16(out + i, _mm512_mul_ps(decode16<F>(codes + i), s));
    store16(out + i + 16, _mm512_mul_ps(decode16<F>(codes + i + 16), s));
  }
  return full;
}

// Magnitudes as bits order like the values; NaN lanes (above infinity) are left out, as fmax
// leaves them out in the scalar code.
SHMOE_AVX512 std::size_t abs_max_bf16_16(const std::uint16_t* x, std::size_t n, float* amax) {
  const std::size_t full = n / 16 * 16;
  __m512i best = _mm512_setzero_si512();
  for (std::size_t i = 0; i < full; i += 16) {
    const __m512i abs = _mm512_and_si512(_mm512_castps_si512(load16(x + i)), splat(kAbsMask));
    best = _mm512_mask_max_epu32(best, _mm512_cmple_epu32_mask(abs, splat(kInfBits)), best, abs);
  }
  const float m = std::bit_cast<float>(_mm512_reduce_max_epu32(best));
  if (full != 0 && m > *amax) *amax = m;
  return full;
}

SHMOE_AVX512 std::size_t encode_scaled_16(const std::uint16_t* x, std::size_t n, float mul,
                                          std::uint8_t* codes) {
  const std::size_t full = n / 16 * 16;
  const __m512 m = _mm512_set1_ps(mul);
  for (std::size_t i = 0; i < full; i += 16) {
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(codes + i),
        _mm512_cvtepi32_epi8(encode16<Fp8Format::kE4M3>(_mm512_mul_ps(load16(x + i), m))));
  }
  return full;
}

// An E4M3 value has 4 significant bits, so its fp32 bits end in 16 zeros: the top half is the
// bf16 of the same value.
SHMOE_AVX512 std::size_t e4m3_to_bf16_16(const std::uint8_t* codes, std::size_t n,
                                         std::uint16_t* out) {
  const std::size_t full = n / 16 * 16;
  for (std::size_t i = 0; i < full; i += 16) {
    const __m512i bits = _mm512_castps_si512(decode16<Fp8Format::kE4M3>(codes + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(bits, 16)));
  }
  return full;
}

template <typename Out>
std::size_t dequantize_any(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n,
                           Fp8Format f, Out* out) {
  if (!available()) return 0;
  return f == Fp8Format::kE4M3 ? dequantize_blocks<Fp8Format::kE4M3>(codes, scales, n, out)
                               : dequantize_blocks<Fp8Format::kE5M2>(codes, scales, n, out);
}

template <typename T>
std::size_t quantize_any(const T* x, std::size_t n, Fp8Format f, std::uint8_t* codes,
                         std::uint8_t* scales) {
  if (!available()) return 0;
  return f == Fp8Format::kE4M3 ? quantize_blocks<Fp8Format::kE4M3>(x, n, codes, scales)
                               : quantize_blocks<Fp8Format::kE5M2>(x, n, codes, scales);
}

}  // namespace

std::size_t abs_max_bf16(const std::uint16_t* bf16_bits, std::size_t n, float* amax) {
  if (!available()) return 0;
  return abs_max_bf16_16(bf16_bits, n, amax);
}

std::size_t encode_e4m3_scaled_bf16(const std::uint16_t* bf16_bits, std::size_t n, float mul,
                                    std::uint8_t* codes) {
  if (!available()) return 0;
  return encode_scaled_16(bf16_bits, n, mul, codes);
}

std::size_t e4m3_to_bf16(const std::uint8_t* codes, std::size_t n, std::uint16_t* bf16_bits) {
  if (!available()) return 0;
  return e4m3_to_bf16_16(codes, n, bf16_bits);
}

bool available() {
  return cpu_has_avx512f();
}

std::size_t quantize(const float* x, std::size_t n, Fp8Format f, std::uint8_t* codes,
                     std::uint8_t* scales) {
  return quantize_any(x, n, f, codes, scales);
}
std::size_t quantize(const std::uint16_t* bf16_bits, std::size_t n, Fp8Format f,
                     std::uint8_t* codes, std::uint8_t* scales) {
  return quantize_any(bf16_bits, n, f, codes, scales);
}

std::size_t dequantize(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n,
                       Fp8Format f, float* out) {
  return dequantize_any(codes, scales, n, f, out);
}

std::size_t dequantize_bf16(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n,
                            Fp8Format f, std::uint16_t* out) {
  return dequantize_any(codes, scales, n, f, out);
}

#else  // no x86: no AVX-512

bool available() {
  return false;
}
std::size_t quantize(const float*, std::size_t, Fp8Format, std::uint8_t*, std::uint8_t*) {
  return 0;
}
std::size_t quantize(const std::uint16_t*, std::size_t, Fp8Format, std::uint8_t*, std::uint8_t*) {
  return 0;
}
std::size_t dequantize(const std::uint8_t*, const std::uint8_t*, std::size_t, Fp8Format, float*) {
  return 0;
}
std::size_t dequantize_bf16(const std::uint8_t*, const std::uint8_t*, std::size_t, Fp8Format,
                            std::uint16_t*) {
  return 0;
}
std::size_t abs_max_bf16(const std::uint16_t*, std::size_t, float*) {
  return 0;
}
std::size_t encode_e4m3_scaled_bf16(const std::uint16_t*, std::size_t, float, std::uint8_t*) {
  return 0;
}
std::size_t e4m3_to_bf16(const std::uint8_t*, std::size_t, std::uint16_t*) {
  return 0;
}

#endif

}  // namespace shmoe::numeric::mx_avx512
