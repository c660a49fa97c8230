// MegaMoE's GEMM epilogues: GemmEngine::multiply hands every row of the product to its epilogue
// once, in blocks of at most kBlockRows, with the bits the plain product has, and both agree with
// an fp64 product; GEMM1's SwiGLU epilogue and GEMM2's row epilogue give the bytes of the separate
// passes (gemm1_tile + swiglu_quantize, gemm2_tile) that the unfused chain runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "moe/expert_ffn.hpp"
#include "moe/mega_gemm.hpp"
#include "numeric/mx.hpp"

namespace {

using shmoe::moe::ExpertFfnShape;
using shmoe::moe::FfnScratch;
using shmoe::moe::GemmEngine;
using shmoe::moe::MxRow;
using shmoe::moe::WeightForm;
using shmoe::numeric::Fp8Format;

// n MX FP8 rows in `layout`, from fresh normal values.
std::vector<std::uint8_t> random_rows(std::mt19937& gen, int n, const MxRow& layout, Fp8Format f) {
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> v(static_cast<std::size_t>(layout.elems));
  std::vector<std::uint8_t> out(static_cast<std::size_t>(n) * layout.bytes());
  for (int r = 0; r < n; ++r) {
    for (auto& x : v) x = normal(gen);
    auto* row = out.data() + static_cast<std::size_t>(r) * layout.bytes();
    shmoe::numeric::quantize_mx(v.data(), v.size(), f, row, row + layout.scales_offset());
  }
  return out;
}

std::vector<float> dequantized(const std::vector<std::uint8_t>& rows, int n, const MxRow& layout,
                               Fp8Format f) {
  std::vector<float> out(static_cast<std::size_t>(n) * layout.elems);
  for (int r = 0; r < n; ++r) {
    const auto* row = rows.data() + static_cast<std::size_t>(r) * layout.bytes();
    shmoe::numeric::dequantize_mx(row, row + layout.scales_offset(), layout.elems, f,
                                  out.data() + static_cast<std::size_t>(r) * layout.elems);
  }
  return out;
}

const ExpertFfnShape kShape{96, 160, Fp8Format::kE4M3};  // k not a multiple of 64: padded tiles

class Epilogue : public ::testing::TestWithParam<WeightForm> {};

TEST_P(Epilogue, EveryRowOnceInBlocksWithThePlainProductsBitsWithinFp64Bounds) {
  const GemmEngine g;
  std::mt19937 gen(std::random_device{}());
  const MxRow wl = kShape.token_row();
  const int n = kShape.ffn_dim, k = wl.elems;
  const auto w_rows = random_rows(gen, n, wl, kShape.format);
  const auto w = g.load(reinterpret_cast<const std::byte*>(w_rows.data()), wl.bytes(), n, k,
                        kShape.format, GetParam());
  const auto w_ref = dequantized(w_rows, n, wl, kShape.format);
  for (const int m : {1, 3, 8, 9, 16, 17, 40, 128}) {
    SCOPED_TRACE(testing::Message() << "m=" << m);
    const auto a_rows = random_rows(gen, m, wl, kShape.format);
    const auto a_ref = dequantized(a_rows, m, wl, kShape.format);
    std::vector<std::byte> a(static_cast<std::size_t>(m) * k * GemmEngine::bytes_of(g.input(w, m)));
    GemmEngine::expand_rows(reinterpret_cast<const std::byte*>(a_rows.data()), wl.bytes(), m, k,
                            kShape.format, g.input(w, m), a.data());
    std::vector<float> plain(static_cast<std::size_t>(m) * n);
    g.multiply(w, a.data(), m, plain.data());
    std::vector<float> block(static_cast<std::size_t>(GemmEngine::kBlockRows) * n, NAN);
    std::vector<float> fused(plain.size(), NAN);
    int next = 0;
    g.multiply(w, a.data(), m, block.data(), [&](int r0, int r1, const float* rows) {
      ASSERT_EQ(r0, next);
      ASSERT_GT(r1, r0);
      ASSERT_LE(r1 - r0, GemmEngine::kBlockRows);
      ASSERT_EQ(rows, block.data());
      std::memcpy(fused.data() + static_cast<std::size_t>(r0) * n, rows,
                  sizeof(float) * (r1 - r0) * n);
      next = r1;
    });
    ASSERT_EQ(next, m);
    ASSERT_EQ(0, std::memcmp(plain.data(), fused.data(), sizeof(float) * plain.size()));
    // Exact products summed in fp32: within k ulps of the sum of magnitudes.
    for (int r = 0; r < m; ++r) {
      for (int j = 0; j < n; ++j) {
        double sum = 0, mag = 0;
        for (int i = 0; i < k; ++i) {
          const double p = double(a_ref[r * k + i]) * w_ref[j * k + i];
          sum += p;
          mag += std::fabs(p);
        }
        ASSERT_NEAR(plain[r * n + j], sum, k * std::ldexp(mag, -24) + 1e-30)
            << "row " << r << " column " << j;
      }
    }
  }
}

TEST_P(Epilogue, Gemm1SwigluAndGemm2RowsGiveTheSeparatePassesBytes) {
  const GemmEngine g;
  std::mt19937 gen(std::random_device{}());
  const MxRow tl = kShape.token_row(), al = kShape.act_row();
  const auto w1 = random_rows(gen, kShape.ffn_dim, tl, kShape.format);
  const auto w2 = random_rows(gen, kShape.model_dim, al, kShape.format);
  const auto w = load_expert(g, kShape, w1.data(), w2.data(), GetParam());
  for (const int m : {1, 8, 9, 37}) {
    SCOPED_TRACE(testing::Message() << "m=" << m);
    const auto tokens = random_rows(gen, m, tl, kShape.format);
    const auto* rows = reinterpret_cast<const std::byte*>(tokens.data());
    FfnScratch scratch;
    std::vector<float> h(static_cast<std::size_t>(m) * kShape.ffn_dim);
    gemm1_tile(kShape, g, w, rows, tl.bytes(), m, h.data(), scratch);
    std::vector<std::byte> act(static_cast<std::size_t>(m) * al.bytes(), std::byte{0});
    std::vector<std::byte> act_fused(act.size(), std::byte{0});
    swiglu_quantize(kShape, h.data(), 0, m, act.data());
    gemm1_swiglu(kShape, g, w, rows, tl.bytes(), m, act_fused.data(), scratch);
    ASSERT_EQ(0, std::memcmp(act.data(), act_fused.data(), act.size()));

    const auto D = static_cast<std::size_t>(kShape.model_dim);
    std::vector<std::uint16_t> out(m * D), scattered(m * D, 0xffff);
    gemm2_tile(kShape, g, w, act.data(), m, out.data(), scratch);
    // Rows to shuffled places, each announced once, right after it is written.
    std::vector<int> place(m), written;
    for (int r = 0; r < m; ++r) place[r] = (r * 7 + 3) % m;
    if (std::gcd(7, m) != 1) std::iota(place.rbegin(), place.rend(), 0);
    int pending = -1;
    gemm2_rows(kShape, g, w, act.data(), m,
               {[&](int r) {
                  EXPECT_EQ(pending, -1);
                  pending = r;
                  return scattered.data() + place[r] * D;
                },
                [&](int r) {
                  EXPECT_EQ(r, pending);
                  pending = -1;
                  written.push_back(r);
                }},
               scratch);
    ASSERT_EQ(static_cast<int>(written.size()), m);
    for (int r = 0; r < m; ++r) {
      ASSERT_EQ(written[r], r);
      ASSERT_EQ(0, std::memcmp(out.data() + r * D, scattered.data() + place[r] * D, 2 * D))
          << "row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, Epilogue, ::testing::Values(WeightForm::kFp8, WeightForm::kPacked),
                         [](const auto& info) {
                           return info.param == WeightForm::kFp8 ? "fp8" : "packed";
                         });

}  // namespace
