#include "numeric/swiglu.hpp"

#include <bit>
#include <cmath>

#include "common/cpu_features.hpp"

#if defined(__x86_64__) || defined(__i386__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), an uninitialised variable by
// design, which -Wmaybe-uninitialized reports once they are inlined here.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define SHMOE_SWIGLU_X86 1
#define SHMOE_AVX2 __attribute__((target("avx2,fma")))
#define SHMOE_AVX512 __attribute__((target("avx512f")))
#endif

namespace shmoe::numeric {
namespace {

// Beyond these e^x is 0 (below half the smallest subnormal) or infinite; clamping keeps 2^n's
// halves within the exponent range.
constexpr float kExpLow = -110.0f, kExpHigh = 100.0f;
constexpr float kLog2e = 1.44269504088896341f;
// ln 2 = kLn2Hi + kLn2Lo, the first with few enough bits that n * kLn2Hi is exact in range.
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
// Adding and subtracting 1.5 * 2^23 rounds to an integer, to nearest even, for |t| < 2^22.
constexpr float kRoundMagic = 12582912.0f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

float pow2(int k) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(k + 127) << 23);
}

// Each line matches one instruction of exp8 below (fmaf: one fused multiply-add).
float exp_scalar(float x) {
  x = x > kExpLow ? x : kExpLow;  // as maxps: a NaN gives kExpLow (its caller keeps the NaN)
  x = x < kExpHigh ? x : kExpHigh;
  const float n = (x * kLog2e + kRoundMagic) - kRoundMagic;
  float r = std::fmaf(-n, kLn2Hi, x);
  r = std::fmaf(-n, kLn2Lo, r);
  const float r2 = r * r;
  float p = std::fmaf(kP0, r, kP1);
  p = std::fmaf(p, r, kP2);
  p = std::fmaf(p, r, kP3);
  p = std::fmaf(p, r, kP4);
  p = std::fmaf(p, r, kP5);
  const float y = std::fmaf(p, r2, r) + 1.0f;
  // y * 2^n rounded once: y * 2^n1 is exact (normal), as AVX-512's scalef computes it.
  const int ni = static_cast<int>(n);
  const int n1 = ni >> 1;  // arithmetic shift: floor(ni / 2), as srai
  return (y * pow2(n1)) * pow2(ni - n1);
}

float swiglu_scalar(float gate, float up) {
  return gate / (1.0f + exp_scalar(-gate)) * up;
}

#ifdef SHMOE_SWIGLU_X86

SHMOE_AVX2 inline __m256 splat(float v) {
  return _mm256_set1_ps(v);
}

SHMOE_AVX2 inline __m256 pow2_8(__m256i k) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}

SHMOE_AVX2 inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(x, splat(kExpLow));
  x = _mm256_min_ps(x, splat(kExpHigh));
  const __m256 n = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(x, splat(kLog2e)), splat(kRoundMagic)),
                                 splat(kRoundMagic));
  __m256 r = _mm256_fnmadd_ps(n, splat(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, splat(kLn2Lo), r);
  const __m256 r2 = _mm256_mul_ps(r, r);
  __m256 p = _mm256_fmadd_ps(splat(kP0), r, splat(kP1));
  p = _mm256_fmadd_ps(p, r, splat(kP2));
  p = _mm256_fmadd_ps(p, r, splat(kP3));
  p = _mm256_fmadd_ps(p, r, splat(kP4));
  p = _mm256_fmadd_ps(p, r, splat(kP5));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), splat(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);  // n is integral: exact
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  return _mm256_mul_ps(_mm256_mul_ps(y, pow2_8(n1)), pow2_8(_mm256_sub_epi32(ni, n1)));
}

SHMOE_AVX2 void swiglu_avx2(const float* gate, const float* up, std::size_t n, float* out) {
  const std::size_t full = n / 8 * 8;
  const __m256 sign = splat(-0.0f);
  for (std::size_t i = 0; i < full; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp8(_mm256_xor_ps(g, sign));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(splat(1.0f), e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (std::size_t i = full; i < n; ++i) out[i] = swiglu_scalar(gate[i], up[i]);
}

SHMOE_AVX512 inline __m512 splat16(float v) {
  return _mm512_set1_ps(v);
}

// exp8 on 16 lanes: the same roundings, in fewer steps (roundscale rounds to the nearest
// integer, ties to even, as the magic constant does; scalef multiplies by 2^n rounding once).
SHMOE_AVX512 inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, splat16(kExpLow));
  x = _mm512_min_ps(x, splat16(kExpHigh));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, splat16(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, splat16(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, splat16(kLn2Lo), r);
  const __m512 r2 = _mm512_mul_ps(r, r);
  __m512 p = _mm512_fmadd_ps(splat16(kP0), r, splat16(kP1));
  p = _mm512_fmadd_ps(p, r, splat16(kP2));
  p = _mm512_fmadd_ps(p, r, splat16(kP3));
  p = _mm512_fmadd_ps(p, r, splat16(kP4));
  p = _mm512_fmadd_ps(p, r, splat16(kP5));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), splat16(1.0f));
  return _mm512_scalef_ps(y, n);
}

SHMOE_AVX512 void swiglu_avx512(const float* gate, const float* up, std::size_t n, float* out) {
  const std::size_t full = n / 16 * 16;
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  for (std::size_t i = 0; i < full; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 e = exp16(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(g), sign)));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(splat16(1.0f), e));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(silu, _mm512_loadu_ps(up + i)));
  }
  for (std::size_t i = full; i < n; ++i) out[i] = swiglu_scalar(gate[i], up[i]);
}

#endif  // SHMOE_SWIGLU_X86

}  // namespace

bool swiglu_kernel_available(SwigluKernel k) {
  switch (k) {
    case SwigluKernel::kAvx2:
      return cpu_has_fma();
    case SwigluKernel::kAvx512:
      return cpu_has_avx512f();
    default:
      return true;
  }
}

float swiglu_exp(float x) {
  return exp_scalar(x);
}

void swiglu(const float* gate, const float* up, std::size_t n, float* out, SwigluKernel k) {
#ifdef SHMOE_SWIGLU_X86
  const bool any = k == SwigluKernel::kAuto;
  if ((any || k == SwigluKernel::kAvx512) && cpu_has_avx512f())
    return swiglu_avx512(gate, up, n, out);
  if (k != SwigluKernel::kScalar && cpu_has_fma()) return swiglu_avx2(gate, up, n, out);
#endif
  for (std::size_t i = 0; i < n; ++i) out[i] = swiglu_scalar(gate[i], up[i]);
}

}  // namespace shmoe::numeric
