// MxWeightMatrix: packing, the choice of kernel, and the portable and AVX2 kernels (the AVX-512
// ones are in mx_matrix_avx512.cpp). The portable, AVX2 and AVX-512 kernels follow the lane order
// set out in the header.
#include "numeric/mx_matrix.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/cpu_features.hpp"
#include "numeric/mx.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define SHMOE_MATRIX_X86 1
#define SHMOE_AVX2_FMA __attribute__((target("avx2,fma,f16c")))
#endif

namespace shmoe::numeric {
namespace {

constexpr int kLanes = 16;
constexpr int kBlock = static_cast<int>(kMxBlockSize);
constexpr int kGroup = MxWeightMatrix::kGroupRows;
constexpr int kChunk = MxWeightMatrix::kChunk;
constexpr std::uint8_t kUnitScale = 127;  // 2^0, for the padding

// What the SIMD kernels decode exactly (see the header): no NaN code and scales below 2^120. The
// BF16 kernel needs every value a normal bf16 (scales 2^-107 to 2^112: its expand() relies on
// that), and also every value times 2^-(largest scale - its scale), as it multiplies: the
// smallest non-zero value of the format (2^-9 for E4M3, 2^-16 for E5M2) times 2^-span at least
// 2^-126.
struct Decodable {
  bool simd = true, bf16 = true;
  std::uint8_t max_scale = 0;
};

Decodable decodable(const std::uint8_t* rows, std::size_t stride, int n, int cols, Fp8Format f) {
  Decodable d;
  std::uint8_t min_scale = 255;
  const std::size_t blocks = mx_num_blocks(static_cast<std::size_t>(cols));
  for (int j = 0; j < n && d.simd; ++j) {
    const std::uint8_t* row = rows + j * stride;
    for (int k = 0; k < cols; ++k) {
      d.simd = d.simd && !fp8_is_nan(row[k], f);
      d.bf16 = d.bf16 && !(f == Fp8Format::kE5M2 && (row[k] & 0x7f) == 0x7c);  // infinities
    }
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::uint8_t s = row[cols + b];
      d.simd = d.simd && s < 247;
      d.bf16 = d.bf16 && s >= 20 && s <= 239;
      d.max_scale = std::max(d.max_scale, s);
      min_scale = std::min(min_scale, s);
    }
  }
  const int max_span = f == Fp8Format::kE4M3 ? 126 - 9 : 126 - 16;
  d.bf16 = d.bf16 && d.simd && d.max_scale - min_scale <= max_span;  // no scales: 0 - 255
  return d;
}

MatrixKernel resolve(MatrixKernel k, bool bf16_decodable = true) {
  using K = MatrixKernel;
  if (k == K::kAuto) k = K::kAvx512Bf16;
  if (k == K::kAvx512Bf16 && !(bf16_decodable && mx_matrix_kernels::avx512_bf16_available()))
    k = K::kAvx512;
  if (k == K::kAvx512 && !mx_matrix_kernels::avx512_available()) k = K::kAvx2;
  if (k == K::kAvx2 && !mx_matrix_kernels::avx2_available()) k = K::kPortable;
  return k;
}

// l + (l + 8), + 4, + 2, + 1: the header's order.
float add_lanes(std::array<float, kLanes> v) {
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) v[l] = v[l] + v[l + width];
  }
  return v[0];
}

}  // namespace

bool matrix_kernel_available(MatrixKernel k) {
  return k == MatrixKernel::kAuto || resolve(k) == k;
}

const char* matrix_kernel_name(MatrixKernel k) {
  switch (k) {
    case MatrixKernel::kPortable:
      return "portable";
    case MatrixKernel::kAvx2:
      return "avx2";
    case MatrixKernel::kAvx512:
      return "avx512";
    case MatrixKernel::kAvx512Bf16:
      return "avx512-bf16";
    default:
      return "auto";
  }
}

MxWeightMatrix::MxWeightMatrix(const std::uint8_t* rows, std::size_t stride, int n, int cols,
                               Fp8Format f, MatrixKernel k)
    : rows_(n), cols_(cols), padded_cols_((cols + kChunk - 1) / kChunk * kChunk), format_(f) {
  const Decodable d = decodable(rows, stride, n, cols, f);
  kernel_ = d.simd ? resolve(k, d.bf16) : MatrixKernel::kPortable;
  max_scale_ = d.max_scale;
  const int groups = (n + kGroup - 1) / kGroup, chunks = padded_cols_ / kChunk;
  codes_.assign(static_cast<std::size_t>(groups) * kGroup * padded_cols_, 0);
  scales_.assign(codes_.size() / kBlock, kUnitScale);
  const bool bf16_order = kernel_ == MatrixKernel::kAvx512Bf16;
  const View v = view();
  const std::size_t row_blocks = mx_num_blocks(static_cast<std::size_t>(cols));
  for (int j = 0; j < n; ++j) {
    const std::uint8_t* row = rows + j * stride;
    const int g = j / kGroup, q = j % kGroup;
    for (int c = 0; c < chunks; ++c) {
      std::uint8_t* codes = codes_.data() + v.chunk_offset(g, c) + q * kChunk;
      for (int i = 0; i < kChunk && c * kChunk + i < cols; ++i) {
        const std::uint8_t code = row[c * kChunk + i];
        if (bf16_order) {
          // -0 as +0: the kernel lowers exponents with a subtraction that saturates at +0, but
          // would take -0's sign bit for part of its magnitude.
          codes[mx_matrix_kernels::bf16_chunk_position(i)] = (code & 0x7f) == 0 ? 0 : code;
        } else {
          codes[i] = code;
        }
      }
      std::uint8_t* scales = scales_.data() + v.chunk_offset(g, c) / kBlock + q * 2;
      for (int h = 0; h < 2; ++h) {
        const std::size_t b = static_cast<std::size_t>(c) * 2 + h;
        if (b < row_blocks) scales[h] = row[cols + b];
      }
    }
  }
}

RowType MxWeightMatrix::row_type() const {
  return kernel_ == MatrixKernel::kAvx512Bf16 ? RowType::kBf16 : RowType::kF32;
}

void MxWeightMatrix::times_rows(const void* a, int m, float* out, std::size_t ldo) const {
  if (m <= 0 || rows_ <= 0) return;
  namespace K = mx_matrix_kernels;
  const auto* f32 = static_cast<const float*>(a);
  switch (kernel_) {
    case MatrixKernel::kAvx512Bf16:
      return K::avx512_bf16(view(), static_cast<const std::uint16_t*>(a), m, out, ldo);
    case MatrixKernel::kAvx512:
      return K::avx512(view(), f32, m, out, ldo);
    case MatrixKernel::kAvx2:
      return K::avx2(view(), f32, m, out, ldo);
    default:
      return K::portable(view(), f32, m, out, ldo);
  }
}

void MxWeightMatrix::expand(RowType t, void* out) const {
  if (kernel_ == MatrixKernel::kAvx512Bf16) {
    return mx_matrix_kernels::avx512_bf16_expand(view(), cols_, t, out);
  }
  const View v = view();
  const auto row = static_cast<std::size_t>(cols_);
  for (int j = 0; j < rows_; ++j) {
    const int g = j / kGroup, q = j % kGroup;
    for (int c = 0; c * kChunk < cols_; ++c) {
      const std::size_t at = j * row + static_cast<std::size_t>(c) * kChunk,
                        n = std::min<std::size_t>(kChunk,
                                                  row - static_cast<std::size_t>(c) * kChunk);
      const std::uint8_t* codes = v.chunk(g, c) + q * kChunk;
      const std::uint8_t* scales = v.chunk_scales(g, c) + q * 2;
      if (t == RowType::kBf16) {
        dequantize_mx_bf16(codes, scales, n, format_, static_cast<std::uint16_t*>(out) + at);
      } else {
        dequantize_mx(codes, scales, n, format_, static_cast<float*>(out) + at);
      }
    }
  }
}

namespace mx_matrix_kernels {

int bf16_chunk_position(int k) {
  // VPUNPCKLBW/HBW interleave bytes 0-7 (low) and 8-15 (high) of each 16-byte lane: element
  // 8L + i of the first block must sit at byte 16L + i, of the second at 16L + 8 + i.
  const int block = k / kBlock, e = k % kBlock;
  return 16 * (e / 8) + 8 * block + e % 8;
}

void portable(const View& w, const float* a, int m, float* out, std::size_t ldo) {
  const auto& decode = fp8_decode_table(w.format);
  const auto cols = static_cast<std::size_t>(w.padded_cols);
  std::vector<float> row(cols);
  for (int j = 0; j < w.rows; ++j) {
    const int g = j / kGroup, q = j % kGroup;
    for (std::size_t k = 0; k < cols; ++k) {
      const int c = static_cast<int>(k / kChunk), i = static_cast<int>(k % kChunk);
      const std::uint8_t scale = w.chunk_scales(g, c)[q * 2 + i / kBlock];
      row[k] = decode[w.chunk(g, c)[q * kChunk + i]] * e8m0_to_float(scale);
    }
    for (int r = 0; r < m; ++r) {
      const float* ar = a + r * cols;
      std::array<float, kLanes> lanes{};
      for (std::size_t k = 0; k < cols; k += kLanes) {
        for (int l = 0; l < kLanes; ++l) lanes[l] = std::fma(ar[k + l], row[k + l], lanes[l]);
      }
      out[r * ldo + j] = add_lanes(lanes);
    }
  }
}

#ifdef SHMOE_MATRIX_X86

bool cpu_has_f16c() {
  // CPUID leaf 1, ECX: clang's __builtin_cpu_supports does not know "f16c".
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}

bool avx2_available() {
  static const bool kHas = cpu_has_fma() && cpu_has_f16c();
  return kHas;
}

namespace {

// 16 codes to the fp16 bits of their values (E4M3: times 2^-8; see the header).
template <Fp8Format F>
SHMOE_AVX2_FMA inline __m256i codes_to_fp16(const std::uint8_t* p) {
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (F == Fp8Format::kE5M2) {
    return _mm256_slli_epi16(_mm256_cvtepu8_epi16(c), 8);
  } else {
    // Sign-extended, shifted by 7: the sign lands in bit 15 and also in bit 14, cleared here.
    return _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(c), 7),
                            _mm256_set1_epi16(static_cast<short>(0xbfff)));
  }
}

SHMOE_AVX2_FMA inline float add_lanes_avx2(__m256 lo, __m256 hi) {
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// M rows of a against rows q0 .. q0 + NQ - 1 of group g: lanes 0-7 and 8-15 in two accumulators.
template <Fp8Format F, int M, int NQ>
SHMOE_AVX2_FMA void tile_avx2(const View& w, const float* a, int g, int q0, float* out,
                              std::size_t ldo) {
  const auto cols = static_cast<std::size_t>(w.padded_cols);
  __m256 lo[M][NQ], hi[M][NQ];
#pragma GCC unroll 4
  for (int r = 0; r < M; ++r) {
#pragma GCC unroll 4
    for (int q = 0; q < NQ; ++q) lo[r][q] = hi[r][q] = _mm256_setzero_ps();
  }
  for (int c = 0; c < w.padded_cols / kChunk; ++c) {
    const std::uint8_t* chunk = w.chunk(g, c);
    const std::uint8_t* scales = w.chunk_scales(g, c);
    for (int b = 0; b < 2; ++b) {
#pragma GCC unroll 4
      for (int q = 0; q < NQ; ++q) {
        const std::uint8_t* codes = chunk + (q0 + q) * kChunk + b * kBlock;
        const __m256 s = _mm256_set1_ps(simd_multiplier(F, scales[(q0 + q) * 2 + b]));
#pragma GCC unroll 2
        for (int half = 0; half < 2; ++half) {
          const __m256i h = codes_to_fp16<F>(codes + 16 * half);
          const __m256 w0 = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), s);
          const __m256 w1 = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), s);
#pragma GCC unroll 4
          for (int r = 0; r < M; ++r) {
            const float* ar = a + r * cols + c * kChunk + b * kBlock + 16 * half;
            lo[r][q] = _mm256_fmadd_ps(_mm256_loadu_ps(ar), w0, lo[r][q]);
            hi[r][q] = _mm256_fmadd_ps(_mm256_loadu_ps(ar + 8), w1, hi[r][q]);
          }
        }
      }
    }
  }
  for (int r = 0; r < M; ++r) {
    for (int q = 0; q < NQ; ++q) {
      const int j = g * kGroup + q0 + q;
      if (j < w.rows) out[r * ldo + j] = add_lanes_avx2(lo[r][q], hi[r][q]);
    }
  }
}

template <Fp8Format F>
void avx2_as(const View& w, const float* a, int m, float* out, std::size_t ldo) {
  const auto cols = static_cast<std::size_t>(w.padded_cols);
  const int groups = (w.rows + kGroup - 1) / kGroup;
  // Group by group, so that a group's codes (4 rows) stay in cache for every 2 rows of a.
  for (int g = 0; g < groups; ++g) {
    for (int r = 0; r < m; r += 2) {
      if (m - r >= 2) {  // 16 ymm registers: 2 rows of a against 2 of w at a time
        tile_avx2<F, 2, 2>(w, a + r * cols, g, 0, out + r * ldo, ldo);
        tile_avx2<F, 2, 2>(w, a + r * cols, g, 2, out + r * ldo, ldo);
      } else {
        tile_avx2<F, 1, 4>(w, a + r * cols, g, 0, out + r * ldo, ldo);
      }
    }
  }
}

}  // namespace

void avx2(const View& w, const float* a, int m, float* out, std::size_t ldo) {
  w.format == Fp8Format::kE4M3 ? avx2_as<Fp8Format::kE4M3>(w, a, m, out, ldo)
                               : avx2_as<Fp8Format::kE5M2>(w, a, m, out, ldo);
}

#else

bool cpu_has_f16c() {
  return false;
}
bool avx2_available() {
  return false;
}
void avx2(const View& w, const float* a, int m, float* out, std::size_t ldo) {
  portable(w, a, m, out, ldo);
}

#endif  // SHMOE_MATRIX_X86

}  // namespace mx_matrix_kernels
}  // namespace shmoe::numeric
