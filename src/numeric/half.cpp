#include "numeric/half.hpp"

#include "common/cpu_features.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SHMOE_HALF_X86 1
#define SHMOE_AVX2 __attribute__((target("avx2")))
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

#endif  // SHMOE_HALF_X86

}  // namespace

void floats_to_bf16_streamed(const float* x, std::size_t n, std::uint16_t* out) {
#ifdef SHMOE_HALF_X86
  if (cpu_has_avx2() && reinterpret_cast<std::uintptr_t>(out) % 32 == 0)
    return floats_to_bf16_avx2<true>(x, n, out);
#endif
  floats_to_bf16(x, n, out);
}

void floats_to_bf16(const float* x, std::size_t n, std::uint16_t* out) {
#ifdef SHMOE_HALF_X86
  if (cpu_has_avx2()) return floats_to_bf16_avx2<false>(x, n, out);
#endif
  for (std::size_t i = 0; i < n; ++i) out[i] = float_to_bf16(x[i]).bits;
}

}  // namespace shmoe::numeric
