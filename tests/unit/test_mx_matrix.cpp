// MX FP8 weight matrices times rows (numeric/mx_matrix): every kernel the CPU has against an fp64
// reference of the dequantized weights within the fp32 summation bound, the portable, AVX2 and
// AVX-512 kernels bit for bit against each other (they add in the same order), expand() exact,
// and matrices the SIMD kernels cannot decode (NaN codes, huge scales) routed to the portable
// kernel. Shapes with partial chunks and groups. Fresh random inputs each run.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "numeric/half.hpp"
#include "numeric/mx.hpp"
#include "numeric/mx_matrix.hpp"

namespace shmoe::numeric {
namespace {

constexpr Fp8Format kFormats[] = {Fp8Format::kE4M3, Fp8Format::kE5M2};

std::string name(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? "E4M3" : "E5M2";
}

constexpr MatrixKernel kKernels[] = {MatrixKernel::kPortable, MatrixKernel::kAvx2,
                                     MatrixKernel::kAvx512, MatrixKernel::kAvx512Bf16};

std::string name(MatrixKernel k) {
  return matrix_kernel_name(k);
}

// A weight matrix as MX rows (codes then scales, mx_row bytes apart) and m rows of a whose
// values are MX FP8 values (exact in fp32 and bf16), so that every product is exact.
struct Case {
  int rows, cols, m;
  std::size_t stride;
  std::vector<std::uint8_t> w;
  std::vector<float> a;  // [m][cols]
};

Case make_case(Fp8Format f, int rows, int cols, int m, std::mt19937_64& rng, int scale_lo,
               int scale_hi) {
  const std::size_t blocks = mx_num_blocks(static_cast<std::size_t>(cols));
  Case c{rows, cols, m, static_cast<std::size_t>(cols) + blocks, {}, {}};
  c.w.resize(rows * c.stride);
  std::uniform_int_distribution<int> byte(0, 255), scale(scale_lo, scale_hi);
  for (int j = 0; j < rows; ++j) {
    std::uint8_t* row = c.w.data() + j * c.stride;
    for (int k = 0; k < cols; ++k) {
      do {
        row[k] = static_cast<std::uint8_t>(byte(rng));
      } while (fp8_is_nan(row[k], f) || (f == Fp8Format::kE5M2 && (row[k] & 0x7f) == 0x7c));
    }
    for (std::size_t b = 0; b < blocks; ++b) row[cols + b] = static_cast<std::uint8_t>(scale(rng));
  }
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(static_cast<std::size_t>(m) * cols);
  for (auto& v : x) v = normal(rng);
  c.a.resize(x.size());
  for (int r = 0; r < m; ++r) {
    std::vector<std::uint8_t> codes(cols), scales(blocks);
    quantize_mx(x.data() + r * cols, cols, f, codes.data(), scales.data());
    dequantize_mx(codes.data(), scales.data(), cols, f, c.a.data() + r * cols);
  }
  return c;
}

// a in the matrix's row type, padded to its padded_cols.
std::vector<std::uint16_t> rows_for(const Case& c, const MxWeightMatrix& w) {
  const std::size_t width = w.padded_cols(), elem = w.row_type() == RowType::kBf16 ? 1 : 2;
  std::vector<std::uint16_t> out(c.m * width * elem, 0);
  for (int r = 0; r < c.m; ++r) {
    for (int k = 0; k < c.cols; ++k) {
      const float v = c.a[static_cast<std::size_t>(r) * c.cols + k];
      if (elem == 1) {
        out[r * width + k] = float_to_bf16(v).bits;
      } else {
        std::memcpy(out.data() + (r * width + k) * 2, &v, sizeof v);
      }
    }
  }
  return out;
}

std::vector<float> run(const Case& c, const MxWeightMatrix& w) {
  const auto a = rows_for(c, w);
  std::vector<float> out(static_cast<std::size_t>(c.m) * (c.rows + 3), -1.0f);
  w.times_rows(a.data(), c.m, out.data(), c.rows + 3);
  return out;
}

double weight(const Case& c, Fp8Format f, int j, int k) {
  const std::uint8_t* row = c.w.data() + j * c.stride;
  return std::ldexp(static_cast<double>(decode_fp8(row[k], f)),
                    static_cast<int>(row[c.cols + k / kMxBlockSize]) - 127);
}

std::uint64_t fresh_seed() {
  return std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32);
}

TEST(MxWeightMatrix, EveryKernelWithinTheSummationBoundOfFp64) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  int kernels_run = 0;
  for (const Fp8Format f : kFormats) {
    // 37 rows: a partial group; 200 columns: a partial chunk and a partial block.
    for (const auto& [cols, m] :
         {std::pair{256, 1}, std::pair{224, 2}, std::pair{200, 3}, std::pair{128, 4},
          std::pair{96, 5}, std::pair{160, 6}, std::pair{256, 9}}) {
      const Case c = make_case(f, 37, cols, m, rng, 110, 135);
      for (const MatrixKernel k : kKernels) {
        const MxWeightMatrix w(c.w.data(), c.stride, c.rows, c.cols, f, k);
        if (w.kernel() != k) continue;  // this CPU lacks it
        ++kernels_run;
        const auto out = run(c, w);
        // Each lane adds 2 products per 32-element block, then four additions join the lanes:
        // every term passes through at most padded_cols / 16 + 4 roundings of 2^-24.
        const double steps = w.padded_cols() / 16.0 + 4, u = std::ldexp(1.0, -24);
        const double gamma = steps * u / (1 - steps * u);
        for (int r = 0; r < m; ++r) {
          for (int j = 0; j < c.rows; ++j) {
            double sum = 0, abs_sum = 0;
            for (int k2 = 0; k2 < c.cols; ++k2) {
              const double p = c.a[static_cast<std::size_t>(r) * c.cols + k2] * weight(c, f, j, k2);
              sum += p;
              abs_sum += std::fabs(p);
            }
            const double got = out[static_cast<std::size_t>(r) * (c.rows + 3) + j];
            ASSERT_LE(std::fabs(got - sum), gamma * abs_sum)
                << name(f) << " cols=" << cols << " m=" << m << " row " << r << " col " << j
                << " kernel " << name(k);
          }
          // Columns past rows() (the ldo padding) are not written.
          for (int j = c.rows; j < c.rows + 3; ++j)
            ASSERT_EQ(out[static_cast<std::size_t>(r) * (c.rows + 3) + j], -1.0f) << name(k);
        }
      }
    }
  }
  EXPECT_GE(kernels_run, 10);  // the portable kernel at least, for each case
}

TEST(MxWeightMatrix, PortableAvx2AndAvx512GiveTheSameBits) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  int compared = 0;
  for (const Fp8Format f : kFormats) {
    // Scales from the smallest (2^-127, a subnormal multiplier for E5M2) to the largest the SIMD
    // kernels decode (2^119), and a typical range.
    for (const auto& [lo, hi] : {std::pair{0, 3}, std::pair{100, 140}, std::pair{240, 246}}) {
      for (const int m : {1, 2, 3, 4, 6}) {
        const Case c = make_case(f, 9, 160, m, rng, lo, hi);
        const auto want = run(
            c, MxWeightMatrix(c.w.data(), c.stride, c.rows, c.cols, f, MatrixKernel::kPortable));
        for (const MatrixKernel k : {MatrixKernel::kAvx2, MatrixKernel::kAvx512}) {
          const MxWeightMatrix w(c.w.data(), c.stride, c.rows, c.cols, f, k);
          if (w.kernel() != k) continue;
          const auto got = run(c, w);
          ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
              << name(f) << " m=" << m << " scales " << lo << ".." << hi << " kernel " << name(k);
          ++compared;
        }
      }
    }
  }
  if (compared == 0) GTEST_SKIP() << "this CPU has neither AVX2 with FMA and F16C nor AVX-512";
}

TEST(MxWeightMatrix, ExpandGivesTheExactValuesInEitherType) {
  std::mt19937_64 rng(fresh_seed());
  for (const Fp8Format f : kFormats) {
    const Case c = make_case(f, 7, 200, 1, rng, 100, 150);
    for (const MatrixKernel k : kKernels) {
      const MxWeightMatrix w(c.w.data(), c.stride, c.rows, c.cols, f, k);
      if (w.kernel() != k) continue;
      std::vector<float> f32(static_cast<std::size_t>(c.rows) * c.cols + 1, -7.0f);
      std::vector<std::uint16_t> bf16(f32.size(), 0xdead);
      w.expand(RowType::kF32, f32.data());
      w.expand(RowType::kBf16, bf16.data());
      for (int j = 0; j < c.rows; ++j) {
        for (int k2 = 0; k2 < c.cols; ++k2) {
          const std::size_t i = static_cast<std::size_t>(j) * c.cols + k2;
          ASSERT_EQ(f32[i], weight(c, f, j, k2)) << name(k) << " row " << j << " col " << k2;
          ASSERT_EQ(bf16_to_float({bf16[i]}), weight(c, f, j, k2)) << name(k);
        }
      }
      EXPECT_EQ(f32.back(), -7.0f) << name(k) << ": wrote past the rows";
      EXPECT_EQ(bf16.back(), 0xdead) << name(k) << ": wrote past the rows";
    }
  }
}

TEST(MxWeightMatrix, TheBf16KernelOnlyWhereEveryValueIsANormalBf16) {
  if (!matrix_kernel_available(MatrixKernel::kAvx512Bf16)) GTEST_SKIP() << "no AVX512-BF16 here";
  std::mt19937_64 rng(fresh_seed());
  for (const Fp8Format f : kFormats) {
    // Every value and every value relative to the largest scale a normal bf16: scales 20..239,
    // spanning at most 126 + log2 of the format's smallest non-zero value.
    const int span = f == Fp8Format::kE4M3 ? 126 - 9 : 126 - 16;
    for (const auto& [lo, hi, chosen] :
         {std::tuple{20, 20 + span, true}, std::tuple{239 - span, 239, true},
          std::tuple{20, 21 + span, false}, std::tuple{19, 100, false},
          std::tuple{150, 240, false}}) {
      const Case c = make_case(f, 5, 64, 3, rng, lo, hi);
      // Each end of the range at least once.
      std::vector<std::uint8_t> w = c.w;
      w[c.cols] = static_cast<std::uint8_t>(lo);
      w[c.stride + c.cols] = static_cast<std::uint8_t>(hi);
      const MxWeightMatrix m(w.data(), c.stride, c.rows, c.cols, f, MatrixKernel::kAvx512Bf16);
      EXPECT_EQ(m.kernel() == MatrixKernel::kAvx512Bf16, chosen)
          << name(f) << " scales " << lo << ".." << hi;
    }
  }
}

TEST(MxWeightMatrix, ARowsSumsDoNotDependOnTheRowsThatComeWithIt) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const Fp8Format f : kFormats) {
    // 9 rows of a: tiles of 4, 4 and 1 (AVX-512 kernels), 2 (AVX2), against each row alone; 17
    // rows of w, so that the last group's sums are stored in part.
    const Case c = make_case(f, 17, 200, 9, rng, 100, 140);
    for (const MatrixKernel k : kKernels) {
      const MxWeightMatrix w(c.w.data(), c.stride, c.rows, c.cols, f, k);
      if (w.kernel() != k) continue;
      const auto all = run(c, w);
      for (int r = 0; r < c.m; ++r) {
        Case one = c;
        one.m = 1;
        one.a.assign(c.a.begin() + static_cast<std::ptrdiff_t>(r) * c.cols,
                     c.a.begin() + static_cast<std::ptrdiff_t>(r + 1) * c.cols);
        const auto alone = run(one, w);
        for (int j = 0; j < c.rows; ++j) {
          ASSERT_EQ(
              std::bit_cast<std::uint32_t>(all[static_cast<std::size_t>(r) * (c.rows + 3) + j]),
              std::bit_cast<std::uint32_t>(alone[j]))
              << name(f) << " kernel " << name(k) << " row " << r << " col " << j;
        }
      }
    }
  }
}

TEST(MxWeightMatrix, NanCodesAndHugeScalesGoThroughThePortableKernel) {
  std::mt19937_64 rng(fresh_seed());
  for (const Fp8Format f : kFormats) {
    Case c = make_case(f, 6, 64, 2, rng, 120, 130);
    std::uint8_t* row2 = c.w.data() + 2 * c.stride;
    row2[5] = fp8_spec(f).nan_code;
    MxWeightMatrix w(c.w.data(), c.stride, c.rows, c.cols, f);
    EXPECT_EQ(w.kernel(), MatrixKernel::kPortable) << name(f);
    auto out = run(c, w);
    for (int r = 0; r < 2; ++r) {
      for (int j = 0; j < c.rows; ++j) {
        EXPECT_EQ(std::isnan(out[static_cast<std::size_t>(r) * (c.rows + 3) + j]), j == 2)
            << name(f) << " row " << r << " col " << j;
      }
    }
    row2[5] = 0;
    row2[c.cols + 1] = 250;  // a scale of 2^123
    w = MxWeightMatrix(c.w.data(), c.stride, c.rows, c.cols, f);
    EXPECT_EQ(w.kernel(), MatrixKernel::kPortable) << name(f);
    row2[c.cols + 1] = 246;
    w = MxWeightMatrix(c.w.data(), c.stride, c.rows, c.cols, f, MatrixKernel::kAvx512);
    EXPECT_EQ(w.kernel() != MatrixKernel::kPortable,
              matrix_kernel_available(MatrixKernel::kAvx512) ||
                  matrix_kernel_available(MatrixKernel::kAvx2))
        << name(f) << ": 2^119 is decodable";
  }
}

}  // namespace
}  // namespace shmoe::numeric
