// MX quantisation: a scalar reference, and AVX2 and AVX-512 kernels (mx_avx512.cpp) that mirror it
// operation for operation (same fp32 multiply, same integer rounding), which is what makes them
// bit-identical.
#include "numeric/mx.hpp"

#include <algorithm>
#include <type_traits>

#include "common/cpu_features.hpp"
#include "numeric/half.hpp"
#include "numeric/mx_avx512.hpp"
#include "numeric/mx_rules.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SHMOE_MX_X86 1
#define SHMOE_AVX2 __attribute__((target("avx2")))
#endif

namespace shmoe::numeric {
namespace {

using mx_rules::inverse_scale;
using mx_rules::kAbsMask;
using mx_rules::kInfBits;
using mx_rules::kQuietNan;
using mx_rules::scale_code_from_abs_bits;

inline float to_float(float x) {
  return x;
}
inline float to_float(std::uint16_t bf16_bits) {
  return bf16_to_float({bf16_bits});
}

// ---- Scalar reference ----

template <Fp8Format F, typename T>
void quantize_block_scalar(const T* x, std::size_t len, std::uint8_t* codes, std::uint8_t* scale) {
  // Comparing the bit patterns of magnitudes orders them like the values, and a NaN lands above
  // infinity instead of poisoning the comparison.
  std::uint32_t amax = 0;
  for (std::size_t i = 0; i < len; ++i) {
    amax = std::max(amax, std::bit_cast<std::uint32_t>(to_float(x[i])) & kAbsMask);
  }
  *scale = scale_code_from_abs_bits(amax, F);
  const float mul = inverse_scale(*scale);
  for (std::size_t i = 0; i < len; ++i) codes[i] = encode_fp8(to_float(x[i]) * mul, F);
}

template <Fp8Format F, typename T>
void quantize_scalar(const T* x, std::size_t n, std::uint8_t* codes, std::uint8_t* scales) {
  for (std::size_t i = 0; i < n; i += kMxBlockSize) {
    quantize_block_scalar<F>(x + i, std::min(kMxBlockSize, n - i), codes + i,
                             scales + i / kMxBlockSize);
  }
}

void dequantize_block_scalar(const std::array<float, 256>& table, const std::uint8_t* codes,
                             std::uint8_t scale, std::size_t len, float* out) {
  // A NaN scale could come out of the multiply as either operand's NaN (the compiler may swap
  // them), so write one fixed NaN instead.
  if (scale == kE8m0Nan) {
    std::fill(out, out + len, std::bit_cast<float>(kQuietNan));
    return;
  }
  const float s = e8m0_to_float(scale);
  for (std::size_t i = 0; i < len; ++i) out[i] = table[codes[i]] * s;
}

void dequantize_scalar(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n,
                       Fp8Format f, float* out) {
  const auto& table = fp8_decode_table(f);
  for (std::size_t i = 0; i < n; i += kMxBlockSize) {
    dequantize_block_scalar(table, codes + i, scales[i / kMxBlockSize],
                            std::min(kMxBlockSize, n - i), out + i);
  }
}

// ---- AVX2: full blocks only; a partial last block goes to the scalar code ----

#ifdef SHMOE_MX_X86

SHMOE_AVX2 inline __m256i splat(std::uint32_t v) {
  return _mm256_set1_epi32(static_cast<int>(v));
}

SHMOE_AVX2 inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
SHMOE_AVX2 inline __m256 load8(const std::uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

SHMOE_AVX2 inline std::uint32_t hmax_epu32(__m256i v) {
  __m128i m = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
  return static_cast<std::uint32_t>(_mm_cvtsi128_si32(m));
}

// encode_fp8 on 8 lanes, each path computed for every lane and the right one selected. The
// normal path's integer arithmetic wraps for lanes that end up elsewhere, which is harmless.
template <Fp8Format F>
SHMOE_AVX2 inline __m256i encode8(__m256 x) {
  constexpr Fp8Spec s = fp8_spec(F);
  constexpr int shift = 23 - s.mant_bits;
  const __m256i u = _mm256_castps_si256(x);
  const __m256i abs = _mm256_and_si256(u, splat(kAbsMask));
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(u, 24), splat(0x80));

  __m256i r = _mm256_sub_epi32(abs, splat(std::uint32_t(127 - s.bias) << 23));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(r, shift), splat(1));
  r = _mm256_add_epi32(r, _mm256_add_epi32(lsb, splat((1u << (shift - 1)) - 1u)));
  __m256i code = _mm256_srli_epi32(r, shift);

  const __m256 magic = _mm256_castsi256_ps(splat(std::uint32_t(151 - s.bias - s.mant_bits) << 23));
  const __m256i sub =
      _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(abs), magic)),
                       _mm256_castps_si256(magic));
  // Signed compares are fine: magnitudes are below 2^31.
  code = _mm256_blendv_epi8(code, sub,
                            _mm256_cmpgt_epi32(splat(std::uint32_t(128 - s.bias) << 23), abs));
  const std::uint32_t max_bits = std::bit_cast<std::uint32_t>(s.max_value);
  code = _mm256_blendv_epi8(code, splat(s.max_code), _mm256_cmpgt_epi32(abs, splat(max_bits - 1)));
  if constexpr (F == Fp8Format::kE5M2) {
    code = _mm256_blendv_epi8(code, splat(0x7c), _mm256_cmpeq_epi32(abs, splat(kInfBits)));
  }
  code = _mm256_blendv_epi8(code, splat(s.nan_code), _mm256_cmpgt_epi32(abs, splat(kInfBits)));
  return _mm256_or_si256(code, sign);
}

// Four vectors of byte values in 32-bit lanes to 32 bytes in order. The packs work within 128-bit
// halves, leaving 4-byte groups in the order a0 b0 c0 d0 a1 b1 c1 d1; the permute undoes that.
SHMOE_AVX2 inline void store32(std::uint8_t* out, __m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packus_epi32(a, b);
  const __m256i cd = _mm256_packus_epi32(c, d);
  const __m256i bytes = _mm256_packus_epi16(ab, cd);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permutevar8x32_epi32(bytes, order));
}

template <Fp8Format F, typename T>
SHMOE_AVX2 void quantize_avx2(const T* x, std::size_t n, std::uint8_t* codes,
                              std::uint8_t* scales) {
  const std::size_t full = n / kMxBlockSize * kMxBlockSize;
  for (std::size_t i = 0; i < full; i += kMxBlockSize) {
    const __m256 v0 = load8(x + i), v1 = load8(x + i + 8), v2 = load8(x + i + 16),
                 v3 = load8(x + i + 24);
    const __m256i m = splat(kAbsMask);
    const __m256i amax =
        _mm256_max_epu32(_mm256_max_epu32(_mm256_and_si256(_mm256_castps_si256(v0), m),
                                          _mm256_and_si256(_mm256_castps_si256(v1), m)),
                         _mm256_max_epu32(_mm256_and_si256(_mm256_castps_si256(v2), m),
                                          _mm256_and_si256(_mm256_castps_si256(v3), m)));
    const std::uint8_t scale = scale_code_from_abs_bits(hmax_epu32(amax), F);
    scales[i / kMxBlockSize] = scale;
    const __m256 mul = _mm256_set1_ps(inverse_scale(scale));
    store32(codes + i, encode8<F>(_mm256_mul_ps(v0, mul)), encode8<F>(_mm256_mul_ps(v1, mul)),
            encode8<F>(_mm256_mul_ps(v2, mul)), encode8<F>(_mm256_mul_ps(v3, mul)));
  }
  if (full < n) {
    quantize_block_scalar<F>(x + full, n - full, codes + full, scales + full / kMxBlockSize);
  }
}

// decode_fp8 on 8 codes in 32-bit lanes, without fp32 subnormal intermediates (which a
// flush-to-zero mode would zero): normal codes by rebiasing the bits, subnormals as mant * step.
template <Fp8Format F>
SHMOE_AVX2 inline __m256 decode8(__m256i c) {
  constexpr Fp8Spec s = fp8_spec(F);
  const __m256i mag = _mm256_and_si256(c, splat(0x7f));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, splat(0x80)), 24);
  const __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(mag, 23 - s.mant_bits),
                                          splat(std::uint32_t(127 - s.bias) << 23));
  const __m256 step = _mm256_castsi256_ps(splat(std::uint32_t(128 - s.bias - s.mant_bits) << 23));
  const __m256i sub = _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(mag), step));
  __m256i v = _mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(splat(1u << s.mant_bits), mag));
  if constexpr (F == Fp8Format::kE4M3) {
    v = _mm256_blendv_epi8(v, splat(kQuietNan), _mm256_cmpeq_epi32(mag, splat(0x7f)));
  } else {
    v = _mm256_blendv_epi8(v, splat(kInfBits), _mm256_cmpeq_epi32(mag, splat(0x7c)));
    v = _mm256_blendv_epi8(v, splat(kQuietNan), _mm256_cmpgt_epi32(mag, splat(0x7c)));
  }
  return _mm256_castsi256_ps(_mm256_or_si256(v, sign));
}

SHMOE_AVX2 inline __m256i load8_codes(const std::uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

template <Fp8Format F>
SHMOE_AVX2 void dequantize_avx2(const std::uint8_t* codes, const std::uint8_t* scales,
                                std::size_t n, float* out) {
  const std::size_t full = n / kMxBlockSize * kMxBlockSize;
  for (std::size_t i = 0; i < full; i += kMxBlockSize) {
    const std::uint8_t scale = scales[i / kMxBlockSize];
    if (scale == kE8m0Nan) {
      dequantize_block_scalar(fp8_decode_table(F), codes + i, scale, kMxBlockSize, out + i);
      continue;
    }
    const __m256 s = _mm256_set1_ps(e8m0_to_float(scale));
    for (std::size_t j = i; j < i + kMxBlockSize; j += 8) {
      _mm256_storeu_ps(out + j, _mm256_mul_ps(decode8<F>(load8_codes(codes + j)), s));
    }
  }
  if (full < n) {
    dequantize_block_scalar(fp8_decode_table(F), codes + full, scales[full / kMxBlockSize],
                            n - full, out + full);
  }
}

bool use_avx2(MxKernel k) {
  return k != MxKernel::kScalar && cpu_has_avx2();
}

#endif  // SHMOE_MX_X86

bool use_avx512(MxKernel k) {
  return (k == MxKernel::kAuto || k == MxKernel::kAvx512) && mx_avx512::available();
}

template <typename T>
void quantize_any(const T* x, std::size_t n, Fp8Format f, std::uint8_t* codes, std::uint8_t* scales,
                  MxKernel k) {
  if (use_avx512(k)) {
    const std::size_t done = mx_avx512::quantize(x, n, f, codes, scales);
    if (done < n) {  // the partial last block
      const std::size_t b = done / kMxBlockSize;
      f == Fp8Format::kE4M3
          ? quantize_block_scalar<Fp8Format::kE4M3>(x + done, n - done, codes + done, scales + b)
          : quantize_block_scalar<Fp8Format::kE5M2>(x + done, n - done, codes + done, scales + b);
    }
    return;
  }
#ifdef SHMOE_MX_X86
  if (use_avx2(k)) {
    return f == Fp8Format::kE4M3 ? quantize_avx2<Fp8Format::kE4M3>(x, n, codes, scales)
                                 : quantize_avx2<Fp8Format::kE5M2>(x, n, codes, scales);
  }
#endif
  return f == Fp8Format::kE4M3 ? quantize_scalar<Fp8Format::kE4M3>(x, n, codes, scales)
                               : quantize_scalar<Fp8Format::kE5M2>(x, n, codes, scales);
}

}  // namespace

std::uint8_t e8m0_scale_code(float amax, Fp8Format f) {
  return scale_code_from_abs_bits(std::bit_cast<std::uint32_t>(amax) & kAbsMask, f);
}

bool mx_kernel_available(MxKernel k) {
  switch (k) {
    case MxKernel::kAvx2:
      return cpu_has_avx2();
    case MxKernel::kAvx512:
      return mx_avx512::available();
    default:
      return true;
  }
}

void quantize_mx(const float* x, std::size_t n, Fp8Format f, std::uint8_t* codes,
                 std::uint8_t* scales, MxKernel k) {
  quantize_any(x, n, f, codes, scales, k);
}

void quantize_mx_bf16(const std::uint16_t* bf16_bits, std::size_t n, Fp8Format f,
                      std::uint8_t* codes, std::uint8_t* scales, MxKernel k) {
  quantize_any(bf16_bits, n, f, codes, scales, k);
}

void dequantize_mx(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n,
                   Fp8Format f, float* out, MxKernel k) {
  if (use_avx512(k)) {
    const std::size_t done = mx_avx512::dequantize(codes, scales, n, f, out);
    if (done < n) {
      dequantize_block_scalar(fp8_decode_table(f), codes + done, scales[done / kMxBlockSize],
                              n - done, out + done);
    }
    return;
  }
#ifdef SHMOE_MX_X86
  if (use_avx2(k)) {
    return f == Fp8Format::kE4M3 ? dequantize_avx2<Fp8Format::kE4M3>(codes, scales, n, out)
                                 : dequantize_avx2<Fp8Format::kE5M2>(codes, scales, n, out);
  }
#endif
  dequantize_scalar(codes, scales, n, f, out);
}

void dequantize_mx_bf16(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n,
                        Fp8Format f, std::uint16_t* out, MxKernel k) {
  if (use_avx512(k)) {
    const std::size_t done = mx_avx512::dequantize_bf16(codes, scales, n, f, out);
    codes += done;
    scales += done / kMxBlockSize;
    out += done;
    n -= done;
    k = MxKernel::kScalar;  // the partial last block, if any
  }
  constexpr std::size_t kChunk = 8 * kMxBlockSize;  // whole blocks, in L1
  float values[kChunk];
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t len = std::min(kChunk, n - i);
    dequantize_mx(codes + i, scales + i / kMxBlockSize, len, f, values, k);
    floats_to_bf16(values, len, out + i);
  }
}

namespace {

// The AVX-512 kernel's whole blocks, then the rest (a last partial block, or all of it on other
// CPUs) through the two calls it stands for, in pieces of whole blocks that stay in L1.
template <typename Out>
void round_trip_any(const float* x, std::size_t n, Fp8Format f, Out* out, MxKernel k) {
  std::size_t done = 0;
  if (use_avx512(k)) {
    if constexpr (std::is_same_v<Out, float>) {
      done = mx_avx512::round_trip(x, n, f, out);
    } else {
      done = mx_avx512::round_trip_bf16(x, n, f, out);
    }
  }
  constexpr std::size_t kChunk = 8 * kMxBlockSize;
  std::uint8_t codes[kChunk], scales[kChunk / kMxBlockSize];
  for (std::size_t i = done; i < n; i += kChunk) {
    const std::size_t len = std::min(kChunk, n - i);
    quantize_mx(x + i, len, f, codes, scales, k);
    if constexpr (std::is_same_v<Out, float>) {
      dequantize_mx(codes, scales, len, f, out + i, k);
    } else {
      dequantize_mx_bf16(codes, scales, len, f, out + i, k);
    }
  }
}

}  // namespace

void round_trip_mx(const float* x, std::size_t n, Fp8Format f, float* out, MxKernel k) {
  round_trip_any(x, n, f, out, k);
}

void round_trip_mx_bf16(const float* x, std::size_t n, Fp8Format f, std::uint16_t* out,
                        MxKernel k) {
  round_trip_any(x, n, f, out, k);
}

}  // namespace shmoe::numeric
