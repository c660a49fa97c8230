// DeepEP's FP8 token rows (shmoe_fp8_quantize_token_rows / shmoe_fp8_unpack_token_rows): every
// scale against amax / 448 computed here, every code against the nearest E4M3 value found by
// searching all 256 codes (ties to the even code), the power-of-two scales of round_scale, the
// unpacked values bit for bit, and the refusals.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "numeric/fp8.hpp"
#include "numeric/fp8_blocks.hpp"
#include "numeric/half.hpp"
#include "shmoe/moe.h"

namespace {

using shmoe::numeric::bf16;
using shmoe::numeric::bf16_to_float;
using shmoe::numeric::decode_fp8;
using shmoe::numeric::float_to_bf16;
using shmoe::numeric::Fp8Format;

// The E4M3 value nearest to v (ties to the even code), by looking at every finite code;
// saturating at +-448.
double nearest_e4m3(double v) {
  double best = 0, best_err = std::numeric_limits<double>::infinity();
  int best_code = 0;
  for (int code = 0; code < 256; ++code) {
    const float d = decode_fp8(static_cast<std::uint8_t>(code), Fp8Format::kE4M3);
    if (std::isnan(d)) continue;
    const double err = std::fabs(static_cast<double>(d) - v);
    if (err < best_err || (err == best_err && (code & 1) == 0 && (best_code & 1) != 0)) {
      best = d, best_err = err, best_code = code;
    }
  }
  return best;
}

std::vector<std::uint16_t> random_rows(std::size_t rows, int cols, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<std::uint16_t> x(rows * static_cast<std::size_t>(cols));
  for (auto& v : x) v = float_to_bf16(normal(gen)).bits;
  // A block of zeros and a block with one huge value: the floor of amax, and saturation.
  for (int i = 0; i < 128; ++i) x[i] = 0;
  x[128 + 5] = float_to_bf16(1e4f).bits;
  return x;
}

void check_rows(bool round_scale) {
  constexpr std::size_t rows = 5;
  constexpr int cols = 512, blocks = cols / 128;
  const std::size_t row_bytes = shmoe_fp8_token_row_bytes(cols);
  ASSERT_EQ(row_bytes, static_cast<std::size_t>(cols + blocks * 4));
  const auto x = random_rows(rows, cols, round_scale ? 7u : 3u);
  std::vector<std::uint8_t> packed(rows * row_bytes);
  ASSERT_EQ(shmoe_fp8_quantize_token_rows(x.data(), rows, cols, round_scale, packed.data()), 0);
  std::vector<std::uint16_t> values(rows * cols);
  std::vector<float> scales(rows * blocks);
  ASSERT_EQ(shmoe_fp8_unpack_token_rows(packed.data(), rows, cols, values.data(), scales.data()),
            0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (int b = 0; b < blocks; ++b) {
      const std::size_t at = r * cols + static_cast<std::size_t>(b) * 128;
      float amax = 1e-4f;
      for (int i = 0; i < 128; ++i)
        amax = std::fmax(amax, std::fabs(bf16_to_float(bf16{x[at + i]})));
      float scale = amax * (1.0f / 448.0f), factor = 448.0f / amax;
      if (round_scale) {
        scale = std::exp2(std::ceil(std::log2(scale)));
        factor = 1.0f / scale;
      }
      float stored = 0;
      std::memcpy(&stored, &packed[r * row_bytes + cols + static_cast<std::size_t>(b) * 4], 4);
      ASSERT_EQ(stored, scale) << "row " << r << " block " << b;
      ASSERT_EQ(scales[r * blocks + b], scale);
      for (int i = 0; i < 128; ++i) {
        const float in = bf16_to_float(bf16{x[at + i]}) * factor;
        const double want = nearest_e4m3(in);
        const float code_value = decode_fp8(packed[r * row_bytes + b * 128 + i], Fp8Format::kE4M3);
        ASSERT_EQ(static_cast<double>(code_value), want) << "row " << r << " elem " << b * 128 + i;
        // The unpacked value is the same number as bfloat16 bits.
        ASSERT_EQ(static_cast<double>(bf16_to_float(bf16{values[at + i]})), want);
      }
    }
  }
}

TEST(Fp8TokenRows, ScalesAndCodesMatchTheReference) {
  check_rows(false);
}

TEST(Fp8TokenRows, RoundScaleGivesPowersOfTwo) {
  check_rows(true);
}

// The AVX-512 path (where this CPU has it) and the scalar one give the same bytes, NaNs and
// infinities included, with and without power-of-two scales.
TEST(Fp8TokenRows, EveryKernelGivesTheSameBytes) {
  constexpr std::size_t n = 1024, block = 128;
  auto x = random_rows(1, static_cast<int>(n), 11u);
  x[300] = 0x7fc0;  // NaN
  x[520] = 0x7f80;  // +infinity
  x[777] = 0x0001;  // a bf16 subnormal
  for (const bool pow2 : {false, true}) {
    std::vector<std::uint8_t> scalar(n), wide(n);
    std::vector<float> scalar_scales(n / block), wide_scales(n / block);
    shmoe::numeric::quantize_fp8_blocks_bf16(x.data(), n, block, pow2, scalar.data(),
                                             scalar_scales.data(),
                                             shmoe::numeric::MxKernel::kScalar);
    shmoe::numeric::quantize_fp8_blocks_bf16(x.data(), n, block, pow2, wide.data(),
                                             wide_scales.data(), shmoe::numeric::MxKernel::kAuto);
    EXPECT_EQ(scalar, wide) << "pow2 " << pow2;
    for (std::size_t b = 0; b < n / block; ++b) {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(scalar_scales[b]),
                std::bit_cast<std::uint32_t>(wide_scales[b]))
          << "block " << b;
    }
  }
}

TEST(Fp8TokenRows, EveryKernelDecodesEveryCodeAlike) {
  std::vector<std::uint8_t> codes(256 + 7);  // every code, and a tail shorter than a vector
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint8_t>(i * 37);
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<std::uint8_t>(c);
  std::vector<std::uint16_t> scalar(codes.size()), wide(codes.size());
  shmoe::numeric::fp8_e4m3_to_bf16(codes.data(), codes.size(), scalar.data(),
                                   shmoe::numeric::MxKernel::kScalar);
  shmoe::numeric::fp8_e4m3_to_bf16(codes.data(), codes.size(), wide.data(),
                                   shmoe::numeric::MxKernel::kAuto);
  EXPECT_EQ(scalar, wide);
  for (int c = 0; c < 256; ++c) {
    const float v = decode_fp8(static_cast<std::uint8_t>(c), Fp8Format::kE4M3);
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(bf16{scalar[c]}))) << c;
    } else {
      EXPECT_EQ(bf16_to_float(bf16{scalar[c]}), v) << c;
    }
  }
}

TEST(Fp8TokenRows, ColsMustBeAMultipleOf128) {
  std::vector<std::uint16_t> x(200);
  std::vector<std::uint8_t> out(1024);
  EXPECT_EQ(shmoe_fp8_token_row_bytes(100), 0u);
  EXPECT_EQ(shmoe_fp8_quantize_token_rows(x.data(), 1, 100, 0, out.data()), SHMOE_MOE_REFUSED);
  EXPECT_NE(std::string(shmoe_moe_last_error()).find("cols=100 is not a positive multiple of 128"),
            std::string::npos);
  EXPECT_EQ(shmoe_fp8_quantize_token_rows(nullptr, 1, 128, 0, out.data()), SHMOE_MOE_REFUSED);
  EXPECT_NE(std::string(shmoe_moe_last_error()).find("src"), std::string::npos);
}

}  // namespace
