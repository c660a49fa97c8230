#include "numeric/mx_avx512.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <type_traits>

#include "common/cpu_features.hpp"
#include "numeric/mx_rules.hpp"

#if defined(__x86_64__) || defined(__i386__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), an uninitialised variable by
// design, which -Wmaybe-uninitialized (or -Wuninitialized, in loops unrolled whole) reports once
// they are inlined here.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#define SHMOE_MX_AVX512 1
#define SHMOE_AVX512 __attribute__((target("avx512f,avx512bw")))
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

// encode_fp8 on 16 lanes: numeric/mx.cpp's encode8, step for step. Finite: no lane is a NaN or
// infinite (a block whose scale is not NaN, scaled), so the steps for those are left out.
template <Fp8Format F, bool Finite = false>
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
  if constexpr (Finite) return _mm512_or_si512(code, sign);
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

SHMOE_AVX512 inline __m512i abs_bits(__m512 v) {
  return _mm512_and_si512(_mm512_castps_si512(v), splat(kAbsMask));
}

// The largest magnitude's bits in each of 16 blocks, m[b] holding block b's 16 lane maxima, in
// block order: a tree of unpacks and lane shuffles in place of 16 horizontal reductions.
SHMOE_AVX512 inline __m512i block_maxima(const __m512i* m) {
  __m512i l1[8], l2[4], l3[2];
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: (a, b, a, b)
    l1[i] = _mm512_max_epu32(_mm512_unpacklo_epi32(m[2 * i], m[2 * i + 1]),
                             _mm512_unpackhi_epi32(m[2 * i], m[2 * i + 1]));
  }
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: (a, b, c, d)
    l2[i] = _mm512_max_epu32(_mm512_unpacklo_epi64(l1[2 * i], l1[2 * i + 1]),
                             _mm512_unpackhi_epi64(l1[2 * i], l1[2 * i + 1]));
  }
  constexpr int kEven = _MM_SHUFFLE(2, 0, 2, 0), kOdd = _MM_SHUFFLE(3, 1, 3, 1);
  for (int i = 0; i < 2; ++i) {  // 128-bit lanes: (x 0-1, x 2-3, y 0-1, y 2-3)
    l3[i] = _mm512_max_epu32(_mm512_shuffle_i32x4(l2[2 * i], l2[2 * i + 1], kEven),
                             _mm512_shuffle_i32x4(l2[2 * i], l2[2 * i + 1], kOdd));
  }
  return _mm512_max_epu32(_mm512_shuffle_i32x4(l3[0], l3[1], kEven),
                          _mm512_shuffle_i32x4(l3[0], l3[1], kOdd));
}

// Four vectors of codes (one byte per 32-bit lane) as 64 bytes in order: two saturating packs
// (codes are below 256) interleave them per 128-bit lane; one permute puts them back.
SHMOE_AVX512 inline void store64(std::uint8_t* out, __m512i c0, __m512i c1, __m512i c2,
                                 __m512i c3) {
  const __m512i bytes =
      _mm512_packus_epi16(_mm512_packus_epi32(c0, c1), _mm512_packus_epi32(c2, c3));
  // Dword k of the result is 4-byte group k % 4 of vector k / 4, found at dword 4 (k % 4) + k / 4.
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  _mm512_storeu_si512(out, _mm512_permutexvar_epi32(order, bytes));
}

// The bits of the largest magnitude of each of `blocks` blocks (up to 16; zero past them), in
// block order.
template <typename T>
SHMOE_AVX512 inline __m512i group_maxima(const T* x, int blocks) {
  __m512i m[16];
  for (int b = 0; b < 16; ++b) {
    m[b] = b < blocks
               ? _mm512_max_epu32(abs_bits(load16(x + 32 * b)), abs_bits(load16(x + 32 * b + 16)))
               : _mm512_setzero_si512();
  }
  return block_maxima(m);
}

// scale_code_from_abs_bits on 16 blocks' maxima, for blocks below infinity: the exponent field
// minus emax, at least 0.
template <Fp8Format F>
SHMOE_AVX512 inline __m512i finite_scale_codes(__m512i amax) {
  return _mm512_max_epi32(_mm512_sub_epi32(_mm512_srli_epi32(amax, 23), splat(fp8_spec(F).emax)),
                          _mm512_setzero_si512());
}

// `blocks` whole blocks (an even count up to 16: a GEMM epilogue's panel of 128 columns has 4):
// scale_code_from_abs_bits and inverse_scale on all their scales at once.
template <Fp8Format F, typename T>
SHMOE_AVX512 void quantize_block_group(const T* x, int blocks, std::uint8_t* codes,
                                       std::uint8_t* scales) {
  const __m512i amax = group_maxima(x, blocks);
  const __mmask16 nan = _mm512_cmpge_epu32_mask(amax, splat(kInfBits));
  const __m512i code = _mm512_mask_blend_epi32(nan, finite_scale_codes<F>(amax), splat(kE8m0Nan));
  alignas(16) std::uint8_t scale_codes[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(scale_codes), _mm512_cvtepi32_epi8(code));
  std::memcpy(scales, scale_codes, static_cast<std::size_t>(blocks));
  const __m512 inverse = _mm512_mask_blend_ps(
      nan, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(splat(254), code), 23)),
      _mm512_set1_ps(1.0f));
  auto encode_two = [&](int b, auto finite, __m512i* c) SHMOE_AVX512 {
    const __m512 mul = _mm512_permutexvar_ps(_mm512_set1_epi32(b), inverse);
    c[0] = encode16<F, decltype(finite)::value>(_mm512_mul_ps(load16(x + 32 * b), mul));
    c[1] = encode16<F, decltype(finite)::value>(_mm512_mul_ps(load16(x + 32 * b + 16), mul));
  };
  auto encode_all = [&](auto finite) SHMOE_AVX512 {
    for (int b = 0; b < blocks; b += 2) {
      __m512i c[4];
      encode_two(b, finite, c);
      encode_two(b + 1, finite, c + 2);
      store64(codes + 32 * b, c[0], c[1], c[2], c[3]);
    }
  };
  nan == 0 ? encode_all(std::true_type{}) : encode_all(std::false_type{});
}

template <Fp8Format F, typename T>
SHMOE_AVX512 std::size_t quantize_blocks(const T* x, std::size_t n, std::uint8_t* codes,
                                         std::uint8_t* scales) {
  constexpr std::size_t kGroup = 16 * kMxBlockSize;
  std::size_t grouped = n / kGroup * kGroup;
  for (std::size_t i = 0; i < grouped; i += kGroup)
    quantize_block_group<F>(x + i, 16, codes + i, scales + i / kMxBlockSize);
  if (const auto pairs = static_cast<int>((n - grouped) / (2 * kMxBlockSize)); pairs > 0) {
    quantize_block_group<F>(x + grouped, 2 * pairs, codes + grouped,
                            scales + grouped / kMxBlockSize);
    grouped += 2 * pairs * kMxBlockSize;
  }
  const std::size_t full = n / kMxBlockSize * kMxBlockSize;
  for (std::size_t i = grouped; i < full; i += kMxBlockSize) {
    const __m512 v0 = load16(x + i), v1 = load16(x + i + 16);
    const __m512i amax = _mm512_max_epu32(abs_bits(v0), abs_bits(v1));
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

// The bf16 bits of the magnitudes below FP8's normal range, by magnitude (0 gives zero).
template <Fp8Format F>
constexpr std::array<std::uint16_t, 32> fp8_subnormals_as_bf16() {
  constexpr Fp8Spec s = fp8_spec(F);
  std::array<std::uint16_t, 32> bits{};
  for (unsigned m = 1; m < (1u << s.mant_bits); ++m) {
    const int top = std::bit_width(m) - 1;  // m * 2^(1 - bias - mant), normalised
    const unsigned exponent = 127 + 1 - s.bias - s.mant_bits + top;
    bits[m] = static_cast<std::uint16_t>(exponent << 7 | ((m << (7 - top)) & 0x7f));
  }
  return bits;
}

// Scales under which every nonzero finite value of a block stays an fp32 normal: from the
// smallest subnormal's 2^(1 - bias - mant) up to 2^emax's binade.
template <Fp8Format F>
constexpr bool scale_keeps_normals(std::uint8_t scale) {
  constexpr Fp8Spec s = fp8_spec(F);
  return scale >= s.bias + s.mant_bits && scale <= 254 - s.emax;
}

SHMOE_AVX512 inline __m512i splat16(int v) {
  return _mm512_set1_epi16(static_cast<short>(v));
}

// One block's bf16 values in 16-bit lanes, under a scale_keeps_normals scale: a code's bf16 bits
// (exact: at most 4 significant bits) with the scale's exponent added. The same bits as decode16,
// the multiply and to_bf16_16, as every product is an exact fp32 normal; twice as fast.
template <Fp8Format F>
SHMOE_AVX512 inline __m512i decode32_bf16(const std::uint8_t* codes, std::uint8_t scale) {
  constexpr Fp8Spec s = fp8_spec(F);
  static constexpr std::array<std::uint16_t, 32> kSubnormals = fp8_subnormals_as_bf16<F>();
  constexpr int first_special = F == Fp8Format::kE4M3 ? 0x7f : 0x7c;  // NaN; infinity in E5M2
  constexpr int last_not_nan = F == Fp8Format::kE4M3 ? 0x7e : 0x7c;
  const __m512i c =
      _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes)));
  const __m512i mag = _mm512_and_si512(c, splat16(0x7f));
  const __m512i sign = _mm512_slli_epi16(_mm512_and_si512(c, splat16(0x80)), 8);
  __m512i v =
      _mm512_add_epi16(_mm512_slli_epi16(mag, 7 - s.mant_bits), splat16((127 - s.bias) << 7));
  v = _mm512_mask_permutexvar_epi16(v, _mm512_cmplt_epu16_mask(mag, splat16(1 << s.mant_bits)), mag,
                                    _mm512_loadu_si512(kSubnormals.data()));
  // Nonzero and finite: magnitude - 1 (zero wraps round) below first_special - 1.
  const __mmask32 scaled =
      _mm512_cmplt_epu16_mask(_mm512_sub_epi16(mag, splat16(1)), splat16(first_special - 1));
  v = _mm512_mask_add_epi16(v, scaled, v, splat16((scale - 127) << 7));
  if constexpr (F == Fp8Format::kE5M2) {
    v = _mm512_mask_mov_epi16(v, _mm512_cmpeq_epu16_mask(mag, splat16(first_special)),
                              splat16(kInfBits >> 16));
  }
  v = _mm512_mask_mov_epi16(v, _mm512_cmpgt_epu16_mask(mag, splat16(last_not_nan)),
                            splat16(kQuietNan >> 16));
  return _mm512_or_si512(v, sign);
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
    if constexpr (std::is_same_v<Out, std::uint16_t>) {
      if (scale_keeps_normals<F>(scale)) {
        _mm512_storeu_si512(out + i, decode32_bf16<F>(codes + i, scale));
        continue;
      }
    }
    const __m512 s = _mm512_set1_ps(e8m0_to_float(scale));
    store16(out + i, _mm512_mul_ps(decode16<F>(codes + i), s));
    store16(out + i + 16, _mm512_mul_ps(decode16<F>(codes + i + 16), s));
  }
  return full;
}

// round_trip_group's values in the x domain, for a block of scale 2^e: what encode16 and decode16
// do to x * 2^-e, times 2^e, without either multiply. The magnitude saturates at the scaled
// largest value; then a value of binade b (at least the scaled smallest normal's, whose grid the
// subnormals share) is rounded to a multiple of 2^(b - mant_bits) by adding and subtracting
// 2^(b + 23 - mant_bits), whose ulp that is: round to nearest even, as encode16's integer step.
// Exact for scales from kFastScaleLow to kFastScaleHigh (below).
template <Fp8Format F>
SHMOE_AVX512 inline __m512 round_trip16(__m512 x, __m512i lowest_binade, __m512i largest) {
  constexpr int mant = fp8_spec(F).mant_bits;
  const __m512i u = _mm512_castps_si512(x);
  const __m512i abs = _mm512_min_epu32(_mm512_and_si512(u, splat(kAbsMask)), largest);
  const __m512i binade = _mm512_max_epu32(_mm512_and_si512(abs, splat(kInfBits)), lowest_binade);
  // 2^(b + 23 - mant_bits): its ulp is the grid step of binade b.
  const __m512 shifter = _mm512_castsi512_ps(_mm512_add_epi32(binade, splat((23u - mant) << 23)));
  const __m512 r = _mm512_sub_ps(_mm512_add_ps(_mm512_castsi512_ps(abs), shifter), shifter);
  constexpr int kOrSign = 0xf8;  // a | (b & c): the rounded magnitude with x's sign bit
  return _mm512_castsi512_ps(
      _mm512_ternarylogic_epi32(_mm512_castps_si512(r), u, splat(~kAbsMask), kOrSign));
}

// Scale codes under which round_trip16 is exact: every nonzero value of the block stays an fp32
// normal (scale_keeps_normals) and 2^(b + 23 - mant_bits) finite up to the largest value's binade.
template <Fp8Format F>
constexpr std::uint32_t kFastScaleLow = fp8_spec(F).bias + fp8_spec(F).mant_bits;
template <Fp8Format F>
constexpr std::uint32_t kFastScaleHigh = 254 - fp8_spec(F).emax - (23 - fp8_spec(F).mant_bits);

// A block's 32 values.
SHMOE_AVX512 inline void store_block(float* out, __m512 v0, __m512 v1) {
  _mm512_storeu_ps(out, v0);
  _mm512_storeu_ps(out + 16, v1);
}
// Exact (a round_trip16 value has at most 4 significant bits): the top halves of the bits, the
// odd 16-bit words of the two vectors in one permute.
SHMOE_AVX512 inline void store_block(std::uint16_t* out, __m512 v0, __m512 v1) {
  const __m512i odd_words =
      _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  _mm512_storeu_si512(
      out, _mm512_permutex2var_epi16(_mm512_castps_si512(v0), odd_words, _mm512_castps_si512(v1)));
}

// 16 whole blocks through quantize_block_group and dequantize_blocks in one pass, without the
// codes: where every block is finite and its scale keeps its values normal (any block of real
// data), round_trip16 on each; otherwise the two kernels themselves.
template <Fp8Format F, typename Out>
SHMOE_AVX512 void round_trip_group(const float* x, Out* out) {
  constexpr int kBlocks = 16;
  constexpr Fp8Spec s = fp8_spec(F);
  const __m512i amax = group_maxima(x, kBlocks);
  const __m512i code = finite_scale_codes<F>(amax);
  // Finite (amax below infinity) and a scale round_trip16 takes, as unsigned compares.
  const __mmask16 fast = _mm512_cmplt_epu32_mask(amax, splat(kInfBits)) &
                         _mm512_cmpge_epu32_mask(code, splat(kFastScaleLow<F>)) &
                         _mm512_cmple_epu32_mask(code, splat(kFastScaleHigh<F>));
  if (fast != 0xffff) {
    std::uint8_t codes[kBlocks * kMxBlockSize], scales[kBlocks];
    quantize_block_group<F>(x, kBlocks, codes, scales);
    dequantize_blocks<F>(codes, scales, kBlocks * kMxBlockSize, out);
    return;
  }
  // Per block: the binade of the scaled smallest normal, 2^(1 - bias) * 2^(code - 127), and the
  // bits of the scaled largest value.
  const __m512i lowest = _mm512_slli_epi32(_mm512_add_epi32(code, splat(1 - s.bias)), 23);
  const __m512i largest = _mm512_add_epi32(
      splat(std::bit_cast<std::uint32_t>(s.max_value) - (127u << 23)), _mm512_slli_epi32(code, 23));
  for (int b = 0; b < kBlocks; ++b) {
    const __m512i lane = _mm512_set1_epi32(b);
    const __m512i lo = _mm512_permutexvar_epi32(lane, lowest),
                  hi = _mm512_permutexvar_epi32(lane, largest);
    store_block(out + 32 * b, round_trip16<F>(load16(x + 32 * b), lo, hi),
                round_trip16<F>(load16(x + 32 * b + 16), lo, hi));
  }
}

// Whole groups of 16 blocks by round_trip_group, the other whole blocks (fewer than 16) through
// quantize_blocks and dequantize_blocks.
template <Fp8Format F, typename Out>
SHMOE_AVX512 std::size_t round_trip_blocks(const float* x, std::size_t n, Out* out) {
  constexpr std::size_t kGroup = 16 * kMxBlockSize;
  const std::size_t grouped = n / kGroup * kGroup, full = n / kMxBlockSize * kMxBlockSize;
  for (std::size_t i = 0; i < grouped; i += kGroup) round_trip_group<F>(x + i, out + i);
  if (grouped < full) {
    std::uint8_t codes[kGroup], scales[kGroup / kMxBlockSize];
    quantize_blocks<F>(x + grouped, full - grouped, codes, scales);
    dequantize_blocks<F>(codes, scales, full - grouped, out + grouped);
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

template <typename Out>
std::size_t round_trip_any(const float* x, std::size_t n, Fp8Format f, Out* out) {
  if (!available()) return 0;
  return f == Fp8Format::kE4M3 ? round_trip_blocks<Fp8Format::kE4M3>(x, n, out)
                               : round_trip_blocks<Fp8Format::kE5M2>(x, n, out);
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
  return cpu_has_avx512bw();
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

std::size_t round_trip(const float* x, std::size_t n, Fp8Format f, float* out) {
  return round_trip_any(x, n, f, out);
}
std::size_t round_trip_bf16(const float* x, std::size_t n, Fp8Format f, std::uint16_t* out) {
  return round_trip_any(x, n, f, out);
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
std::size_t round_trip(const float*, std::size_t, Fp8Format, float*) {
  return 0;
}
std::size_t round_trip_bf16(const float*, std::size_t, Fp8Format, std::uint16_t*) {
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
