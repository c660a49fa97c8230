// The AVX-512 kernels of mx_matrix.hpp. Both take a group's 4 rows of w at once against up to 4
// rows of a, so that 4 to 16 accumulator chains hide the latency of the multiply-adds, and read
// the group's chunks as one stream.
#include <algorithm>
#include <array>
#include <bit>
#include <type_traits>
#include <vector>

#include "common/cpu_features.hpp"
#include "common/read_ahead.hpp"
#include "numeric/mx_matrix.hpp"

#if defined(__x86_64__) || defined(__i386__)
#if !defined(__clang__)
// As in mx_avx512.cpp: GCC 12 warns about the intrinsics' deliberately undefined start values.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#define SHMOE_MATRIX_AVX512 1
#define SHMOE_AVX512 __attribute__((target("avx512f,avx512bw,f16c")))
#define SHMOE_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512bf16")))
#endif

namespace shmoe::numeric::mx_matrix_kernels {

#ifdef SHMOE_MATRIX_AVX512

namespace {

constexpr int kBlock = 32;
constexpr int kGroup = MxWeightMatrix::kGroupRows;
constexpr int kChunk = MxWeightMatrix::kChunk;

SHMOE_AVX512 inline float add_lanes(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v),
                                  _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// The accumulators of M rows of a against a group's 4 rows of w: zeroed, and their sums stored
// (rows of w past the matrix's, in its last group, are not).
template <int M>
SHMOE_AVX512 inline void zero(__m512 (&acc)[M][kGroup]) {
#pragma GCC unroll 4
  for (int r = 0; r < M; ++r) {
#pragma GCC unroll 4
    for (int q = 0; q < kGroup; ++q) acc[r][q] = _mm512_setzero_ps();
  }
}

template <int M>
SHMOE_AVX512 inline void store_sums(const __m512 (&acc)[M][kGroup], const View& w, int g,
                                    float* out, std::size_t ldo) {
  for (int r = 0; r < M; ++r) {
    for (int q = 0; q < kGroup; ++q) {
      const int j = g * kGroup + q;
      if (j < w.rows) out[r * ldo + j] = add_lanes(acc[r][q]);
    }
  }
}

// Calls run(std::integral_constant<int, M>, r) for the rows of a in tiles of M = 4 starting at
// row r, the last tile 1 to 4 rows.
template <typename Run>
inline void in_row_tiles(int m, Run&& run) {
  for (int r = 0; r < m; r += 4) {
    switch (std::min(m - r, 4)) {
      case 4:
        run(std::integral_constant<int, 4>{}, r);
        break;
      case 3:
        run(std::integral_constant<int, 3>{}, r);
        break;
      case 2:
        run(std::integral_constant<int, 2>{}, r);
        break;
      default:
        run(std::integral_constant<int, 1>{}, r);
    }
  }
}

// ---- F16C: fp32 products in the header's lane order ----

template <Fp8Format F>
SHMOE_AVX512 inline __m512i codes_to_fp16(const std::uint8_t* p) {
  const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (F == Fp8Format::kE5M2) {
    return _mm512_slli_epi16(_mm512_cvtepu8_epi16(c), 8);
  } else {
    return _mm512_and_si512(_mm512_slli_epi16(_mm512_cvtepi8_epi16(c), 7),
                            _mm512_set1_epi16(static_cast<short>(0xbfff)));
  }
}

template <Fp8Format F, int M>
SHMOE_AVX512 void tile(const View& w, const float* a, int g, float* out, std::size_t ldo) {
  const auto cols = static_cast<std::size_t>(w.padded_cols);
  __m512 acc[M][kGroup];
  zero(acc);
  for (int c = 0; c < w.padded_cols / kChunk; ++c) {
    const std::uint8_t* chunk = w.chunk(g, c);
    const std::uint8_t* scales = w.chunk_scales(g, c);
#pragma GCC unroll 2
    for (int b = 0; b < 2; ++b) {
      __m512 a0[M], a1[M];
#pragma GCC unroll 4
      for (int r = 0; r < M; ++r) {
        a0[r] = _mm512_loadu_ps(a + r * cols + c * kChunk + b * kBlock);
        a1[r] = _mm512_loadu_ps(a + r * cols + c * kChunk + b * kBlock + 16);
      }
#pragma GCC unroll 4
      for (int q = 0; q < kGroup; ++q) {
        const __m512i h = codes_to_fp16<F>(chunk + q * kChunk + b * kBlock);
        const __m512 s = _mm512_set1_ps(simd_multiplier(F, scales[q * 2 + b]));
        const __m512 w0 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), s);
        const __m512 w1 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), s);
#pragma GCC unroll 4
        for (int r = 0; r < M; ++r) {
          acc[r][q] = _mm512_fmadd_ps(a0[r], w0, acc[r][q]);
          acc[r][q] = _mm512_fmadd_ps(a1[r], w1, acc[r][q]);
        }
      }
    }
  }
  store_sums(acc, w, g, out, ldo);
}

template <Fp8Format F>
void f16c_as(const View& w, const float* a, int m, float* out, std::size_t ldo) {
  const auto cols = static_cast<std::size_t>(w.padded_cols);
  const int groups = (w.rows + kGroup - 1) / kGroup;
  // Group by group, so that a group's codes (4 rows) stay in cache for every 4 rows of a.
  for (int g = 0; g < groups; ++g) {
    in_row_tiles(m, [&](auto rows, int r) {
      tile<F, decltype(rows)::value>(w, a + r * cols, g, out + r * ldo, ldo);
    });
  }
}

// ---- AVX512-BF16: codes looked up as bf16, pairs multiplied by VDPBF16PS ----

// The bf16 bits of every code's magnitude, split into low and high bytes (128 each), for the
// two-table byte lookup (VPERMT2B takes 7 index bits; the sign goes on separately).
struct Bf16Tables {
  alignas(64) std::array<std::uint8_t, 128> lo, hi;
};

const Bf16Tables& bf16_tables(Fp8Format f) {
  static const auto kTables = [] {
    std::array<Bf16Tables, 2> t{};
    for (int fi = 0; fi < 2; ++fi) {
      const Fp8Format format = fi == 0 ? Fp8Format::kE4M3 : Fp8Format::kE5M2;
      for (int i = 0; i < 128; ++i) {
        const auto code = static_cast<std::uint8_t>(i);
        const float v = fp8_is_nan(code, format) ? 0.0f : decode_fp8(code, format);
        const std::uint32_t bits = std::bit_cast<std::uint32_t>(v) >> 16;  // exact: <= 4 bits
        t[fi].lo[i] = static_cast<std::uint8_t>(bits & 0xff);
        t[fi].hi[i] = static_cast<std::uint8_t>((bits >> 8) & 0x7f);
      }
    }
    return t;
  }();
  return kTables[f == Fp8Format::kE4M3 ? 0 : 1];
}

// The tables in registers, and the lookup of one chunk: 64 codes (stored in the order the byte
// unpacking puts back) to the bf16 bits of their values, block 0 and block 1.
struct Bf16Lookup {
  __m512i lo_a, lo_b, hi_a, hi_b, sign;

  SHMOE_AVX512_BF16 explicit Bf16Lookup(const Bf16Tables& t)
      : lo_a(_mm512_load_si512(t.lo.data())),
        lo_b(_mm512_load_si512(t.lo.data() + 64)),
        hi_a(_mm512_load_si512(t.hi.data())),
        hi_b(_mm512_load_si512(t.hi.data() + 64)),
        sign(_mm512_set1_epi8(static_cast<char>(0x80))) {}

  SHMOE_AVX512_BF16 void decode(const std::uint8_t* chunk, __m512i (&blocks)[2]) const {
    __m512i codes = _mm512_loadu_si512(chunk);
    // Held in a register: VPERMI2B overwrites its index operand, and GCC would rather load the
    // codes again for each use (3 loads) than copy them.
    asm("" : "+v"(codes));
    const __m512i lo = _mm512_permutex2var_epi8(lo_a, codes, lo_b);
    // hi | (codes & 0x80): the sign.
    const __m512i hi =
        _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi_a, codes, hi_b), codes, sign, 0xf8);
    blocks[0] = _mm512_unpacklo_epi8(lo, hi);
    blocks[1] = _mm512_unpackhi_epi8(lo, hi);
  }
};

// The BF16 kernel reads its codes through common/read_ahead, one call per 64-byte line: it spends
// so long on each line that the misses it has in flight do not cover the memory's latency, and
// without the prefetches it reads well below a streaming read; with them it keeps up, one group
// at a time (the measurements: docs/performance/2026-12-05-mx-kernel.md).

// A block's scale moved into its values' bf16 exponents, relative to the matrix's largest scale
// (the finished sums are multiplied by that one): the exponents go down by the difference, a
// saturating subtraction that leaves +0 at +0 (the matrix stores no -0; decodable() in
// mx_matrix.cpp keeps every other value normal). Against scaling each block's dot product with
// a multiply-add, this takes 2 instructions per 64 codes instead of 2 per 64 codes and row of a:
// faster from 2 rows of a on, a few percent slower at 1.
//
// The drops come from a table of every scale's, each in both halves of 32 bits, so that a block's
// is broadcast straight from memory: one load, where a drop computed in a general register costs
// a move to the vector unit and a shuffle. At one row of a the kernel is bound by its loads and
// its vector instructions about equally, so both this and the codes' single load
// (Bf16Lookup::decode) count.
struct ExponentDrops {
  alignas(64) std::array<std::uint32_t, 256> by_scale{};
  explicit ExponentDrops(std::uint8_t max_scale) {
    for (int s = 0; s <= max_scale; ++s) {
      const auto d = static_cast<std::uint32_t>((max_scale - s) << 7);
      by_scale[s] = d | d << 16;
    }
  }
};

SHMOE_AVX512_BF16 inline __m512bh scaled(__m512i bf16_bits, const ExponentDrops& drops,
                                         std::uint8_t scale) {
  const __m512i down = _mm512_set1_epi32(static_cast<int>(drops.by_scale[scale]));
  return reinterpret_cast<__m512bh>(_mm512_subs_epu16(bf16_bits, down));
}

// The sums of a row of a against a group's 4 rows of w, each times `times` (exact: a power of
// two), stored together: the 4 accumulators are added as a transposition (lanes 4i..4i+3 of each,
// then the 128-bit quarters), 13 instructions where adding each one's 16 lanes apart took 36,
// which counts most on short rows (a group's sums every few chunks). (The
// other kernels add their lanes in the order the header states, shared with the portable kernel;
// this one's order is its own, the same whatever the number of rows of a.)
SHMOE_AVX512_BF16 inline void store_group_sums(const __m512 (&acc)[kGroup], float times, float* out,
                                               int valid) {
  const __m512 t0 =
      _mm512_add_ps(_mm512_unpacklo_ps(acc[0], acc[1]), _mm512_unpackhi_ps(acc[0], acc[1]));
  const __m512 t1 =
      _mm512_add_ps(_mm512_unpacklo_ps(acc[2], acc[3]), _mm512_unpackhi_ps(acc[2], acc[3]));
  const __m512 u = _mm512_add_ps(
      _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t1))),
      _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t1))));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(u),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(u), 1)));
  const __m128 sums = _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)),
                                 _mm_set1_ps(times));
  if (valid >= kGroup) {
    _mm_storeu_ps(out, sums);
  } else {  // the matrix's last group, 1 to 3 rows
    alignas(16) float v[kGroup];
    _mm_store_ps(v, sums);
    std::copy_n(v, valid, out);
  }
}

// M rows of a against group g's 4 weight rows.
template <int M>
SHMOE_AVX512_BF16 void tile_bf16(const View& w, const Bf16Tables& t, const ExponentDrops& drops,
                                 const std::uint16_t* a, int g, float* out, std::size_t ldo) {
  const auto cols = static_cast<std::size_t>(w.padded_cols);
  const Bf16Lookup lookup(t);
  __m512 acc[M][kGroup];
  zero(acc);
  for (int c = 0; c < w.padded_cols / kChunk; ++c) {
    const std::uint8_t* chunk = w.chunk(g, c);
    const std::uint8_t* scales = w.chunk_scales(g, c);
#pragma GCC unroll 4
    for (int q = 0; q < kGroup; ++q) {
      __m512i blocks[2];
      read_ahead(reinterpret_cast<const std::byte*>(chunk + q * kChunk));
      lookup.decode(chunk + q * kChunk, blocks);
      const __m512bh w0 = scaled(blocks[0], drops, scales[q * 2]);
      const __m512bh w1 = scaled(blocks[1], drops, scales[q * 2 + 1]);
#pragma GCC unroll 4
      for (int r = 0; r < M; ++r) {
        // Rows of a straight from L1 (operands of the dot products): registers held in a loop
        // leave too few for 4 rows' accumulators.
        const std::uint16_t* ar = a + r * cols + c * kChunk;
        acc[r][q] =
            _mm512_dpbf16_ps(acc[r][q], reinterpret_cast<__m512bh>(_mm512_loadu_si512(ar)), w0);
        acc[r][q] = _mm512_dpbf16_ps(
            acc[r][q], reinterpret_cast<__m512bh>(_mm512_loadu_si512(ar + kBlock)), w1);
      }
    }
  }
  const float times = e8m0_to_float(w.max_scale);
#pragma GCC unroll 4
  for (int r = 0; r < M; ++r) {
    store_group_sums(acc[r], times, out + r * ldo + g * kGroup, w.rows - g * kGroup);
  }
}

// Lanes [0, n) of a 16-lane store (n may be 0 or more than 16).
inline __mmask16 first_lanes(std::ptrdiff_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// Row j of a matrix stored for the BF16 kernel: its first `cols` values, exact, as type t (bf16:
// exact where they are normal bf16 values; the kernel is only chosen where they are).
SHMOE_AVX512_BF16 void expand_row_bf16(const View& w, const Bf16Tables& tb, int j, int cols,
                                       RowType t, void* out) {
  const Bf16Lookup lookup(tb);
  const int g = j / kGroup, q = j % kGroup;
  for (int c = 0; c * kChunk < cols; ++c) {
    __m512i blocks[2];
    lookup.decode(w.chunk(g, c) + q * kChunk, blocks);
#pragma GCC unroll 2
    for (int b = 0; b < 2; ++b) {
      const std::uint8_t scale = w.chunk_scales(g, c)[q * 2 + b];
      const std::ptrdiff_t first = static_cast<std::ptrdiff_t>(c) * kChunk + b * kBlock,
                           left = cols - first;
      if (t == RowType::kBf16) {
        // The scale added to the exponent of every non-zero value: exact, as the kernel is only
        // chosen where the result stays a normal bf16.
        const __m512i delta = _mm512_set1_epi16(static_cast<short>((scale - 127) * 128));
        const __m512i v = _mm512_mask_add_epi16(
            blocks[b], _mm512_test_epi16_mask(blocks[b], _mm512_set1_epi16(0x7fff)), blocks[b],
            delta);
        auto* o = static_cast<std::uint16_t*>(out) + first;
        if (left >= 32) {  // a plain store: masked ones are slow on some CPUs (AMD's)
          _mm512_storeu_si512(o, v);
        } else if (left > 0) {
          _mm512_mask_storeu_epi16(o, __mmask32((1u << left) - 1), v);
        }
        continue;
      }
      const __m512 s = _mm512_set1_ps(e8m0_to_float(scale));
      // bf16 -> fp32 is a shift; times the scale, exact (4 significant bits).
      const __m512 v0 =
          _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(
                            _mm512_cvtepu16_epi32(_mm512_castsi512_si256(blocks[b])), 16)),
                        s);
      const __m512 v1 =
          _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(
                            _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(blocks[b], 1)), 16)),
                        s);
      auto* o = static_cast<float*>(out) + first;
      if (left >= 32) {
        _mm512_storeu_ps(o, v0);
        _mm512_storeu_ps(o + 16, v1);
      } else {
        _mm512_mask_storeu_ps(o, first_lanes(left), v0);
        _mm512_mask_storeu_ps(o + 16, first_lanes(left - 16), v1);
      }
    }
  }
}

}  // namespace

bool avx512_available() {
  static const bool kHas = cpu_has_avx512bw() && cpu_has_f16c();
  return kHas;
}

void avx512(const View& w, const float* a, int m, float* out, std::size_t ldo) {
  w.format == Fp8Format::kE4M3 ? f16c_as<Fp8Format::kE4M3>(w, a, m, out, ldo)
                               : f16c_as<Fp8Format::kE5M2>(w, a, m, out, ldo);
}

bool avx512_bf16_available() {
  static const bool kHas = [] {
    __builtin_cpu_init();
    return avx512_available() && __builtin_cpu_supports("avx512vbmi") && cpu_has_avx512bf16();
  }();
  return kHas;
}

void avx512_bf16_expand(const View& w, int cols, RowType t, void* out) {
  const Bf16Tables& tb = bf16_tables(w.format);
  const std::size_t elem = t == RowType::kF32 ? 4 : 2;
  for (int j = 0; j < w.rows; ++j) {
    expand_row_bf16(w, tb, j, cols, t, static_cast<std::byte*>(out) + j * cols * elem);
  }
}

void avx512_bf16(const View& w, const std::uint16_t* a, int m, float* out, std::size_t ldo) {
  const Bf16Tables& t = bf16_tables(w.format);
  const ExponentDrops drops(w.max_scale);
  const auto cols = static_cast<std::size_t>(w.padded_cols);
  const int groups = (w.rows + kGroup - 1) / kGroup;
  // Group by group, so that a group's codes (4 rows, 8 KB at 2048 columns) are read from memory
  // once and from L1 for every further 4 rows of a. (Expanding each group once into a bf16 panel
  // and multiplying with VDPBF16PS alone was slower below 16 rows: 1.0 ms against 0.55 ms at 4
  // rows of a 2816 x 2048 weight, as the expansion stalled on memory.)
  for (int g = 0; g < groups; ++g) {
    in_row_tiles(m, [&](auto rows, int r) {
      tile_bf16<decltype(rows)::value>(w, t, drops, a + r * cols, g, out + r * ldo, ldo);
    });
  }
}

#else

bool avx512_available() {
  return false;
}
void avx512(const View& w, const float* a, int m, float* out, std::size_t ldo) {
  portable(w, a, m, out, ldo);
}
bool avx512_bf16_available() {
  return false;
}
void avx512_bf16(const View&, const std::uint16_t*, int, float*, std::size_t) {}
void avx512_bf16_expand(const View&, int, RowType, void*) {}

#endif

}  // namespace shmoe::numeric::mx_matrix_kernels
