#include "numeric/half.hpp"

#include "common/cpu_features.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SHMOE_HALF_X86 1
#define SHMOE_AVX2 __attribute__((target("avx2")))
#define SHMOE_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#endif

namespace shmoe::numeric {
namespace {

#ifdef SHMOE_HALF_X86

SHMOE_AVX2 inline __m256i splat(std::uint32_t v) {
  return _mm256_set1_epi32(static_cast<int>(v));
}

// float_to_bf16 on 8 lanes, the results in the low halves of 32-bit lanes.
SHMOE_AVX2 inline __m256i to_bf16_8(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), splat(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, splat(0x7fffu))), 16);
  const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), splat(0x40u));
  // Signed compare: magnitudes are below 2^31.
  const __m256i is_nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(u, splat(0x7fffffffu)), splat(0x7f800000u));
  return _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
}

// Streamed: non-temporal stores (out 32-byte aligned), fenced so that they are seen before any
// later store.
template <bool Streamed>
SHMOE_AVX2 void floats_to_bf16_avx2(const float* x, std::size_t n, std::uint16_t* out) {
  const std::size_t full = n / 16 * 16;
  for (std::size_t i = 0; i < full; i += 16) {
    const __m256i lo = to_bf16_8(_mm256_loadu_ps(x + i));
    const __m256i hi = to_bf16_8(_mm256_loadu_ps(x + i + 8));
    // The pack interleaves 128-bit halves (lo0 hi0 lo1 hi1); the permute restores the order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
    auto* to = reinterpret_cast<__m256i*>(out + i);
    if constexpr (Streamed) {
      _mm256_stream_si256(to, packed);
    } else {
      _mm256_storeu_si256(to, packed);
    }
  }
  for (std::size_t i = full; i < n; ++i) out[i] = float_to_bf16(x[i]).bits;
  if constexpr (Streamed) _mm_sfence();
}

// One instruction rounds 16 values, ties to even, as float_to_bf16 does for every value but two
// kinds: NaNs (the instruction's quiet NaN may differ) and fp32 subnormals (it takes them as zero).
// A group of 32 holding either goes through the AVX2 code instead, so the bits are the same.
template <bool Streamed>
SHMOE_AVX512_BF16 void floats_to_bf16_avx512(const float* x, std::size_t n, std::uint16_t* out) {
  const std::size_t full = n / 32 * 32;
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  for (std::size_t i = 0; i < full; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    const __m512i abs_a = _mm512_and_si512(_mm512_castps_si512(a), abs_mask);
    const __m512i abs_b = _mm512_and_si512(_mm512_castps_si512(b), abs_mask);
    // A nonzero subnormal has abs - 1 below the largest subnormal (unsigned: zero wraps round); a
    // NaN's abs is above infinity's.
    const __m512i one = _mm512_set1_epi32(1), largest_subnormal = _mm512_set1_epi32(0x007fffff);
    const __m512i inf = _mm512_set1_epi32(0x7f800000);
    const __mmask16 odd = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(abs_a, one), largest_subnormal) |
                          _mm512_cmplt_epu32_mask(_mm512_sub_epi32(abs_b, one), largest_subnormal) |
                          _mm512_cmpgt_epu32_mask(abs_a, inf) | _mm512_cmpgt_epu32_mask(abs_b, inf);
    if (odd != 0) {
      floats_to_bf16_avx2<Streamed>(x + i, 32, out + i);
      continue;
    }
    // A vector cast: the bf16 vector's bits as integers (no intrinsic names this cast).
    const auto ra = (__m256i)_mm512_cvtneps_pbh(a);
    const auto rb = (__m256i)_mm512_cvtneps_pbh(b);
    auto* to = reinterpret_cast<__m256i*>(out + i);
    if constexpr (Streamed) {
      _mm256_stream_si256(to, ra);
      _mm256_stream_si256(to + 1, rb);
    } else {
      _mm256_storeu_si256(to, ra);
      _mm256_storeu_si256(to + 1, rb);
    }
  }
  floats_to_bf16_avx2<Streamed>(x + full, n - full, out + full);
}

#endif  // SHMOE_HALF_X86

}  // namespace

void floats_to_bf16_streamed(const float* x, std::size_t n, std::uint16_t* out) {
#ifdef SHMOE_HALF_X86
  if (reinterpret_cast<std::uintptr_t>(out) % 32 == 0) {
    if (cpu_has_avx512bf16()) return floats_to_bf16_avx512<true>(x, n, out);
    if (cpu_has_avx2()) return floats_to_bf16_avx2<true>(x, n, out);
  }
#endif
  floats_to_bf16(x, n, out);
}

void floats_to_bf16(const float* x, std::size_t n, std::uint16_t* out) {
#ifdef SHMOE_HALF_X86
  if (cpu_has_avx512bf16()) return floats_to_bf16_avx512<false>(x, n, out);
  if (cpu_has_avx2()) return floats_to_bf16_avx2<false>(x, n, out);
#endif
  for (std::size_t i = 0; i < n; ++i) out[i] = float_to_bf16(x[i]).bits;
}

}  // namespace shmoe::numeric
