// MegaMoE's GEMM epilogues: GemmEngine::multiply hands every element of each weight's product to
// its epilogue once, in row chunks and column panels (GemmEngine::Cut), with
// the bits a product with that weight alone has, within fp64 bounds; GEMM1's SwiGLU epilogue and
// GEMM2's row epilogue give the bytes of the separate passes (gemm1_tile + swiglu_quantize and the
// expansion of its rows, gemm2_tile) that the unfused chain runs.
#include <gtest/gtest.h>

#include <algorithm>
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
using shmoe::moe::GemmInput;
using shmoe::moe::MxRow;
using shmoe::moe::OutRow;
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

// k not a multiple of 64 (padded tiles), W1's halves (80 columns) and W2 (96) one panel each.
const ExpertFfnShape kShape{96, 160, Fp8Format::kE4M3};
// Several panels with a last short one (GemmEngine::cut: 256 columns at k 1024, 384 at 600 in
// bf16): W1's halves 600 columns, W2 1024.
const ExpertFfnShape kPanelShape{1024, 1200, Fp8Format::kE4M3};

class Epilogue : public ::testing::TestWithParam<WeightForm> {};

// Exact products summed in fp32: within k ulps of the sum of magnitudes (every 7th row).
void expect_within_fp64(const std::vector<float>& got, const std::vector<float>& a, int m,
                        const std::vector<float>& w, int n, int k) {
  for (int r = 0; r < m; r += 7) {
    for (int j = 0; j < n; ++j) {
      double sum = 0, mag = 0;
      for (int i = 0; i < k; ++i) {
        const double p = double(a[r * k + i]) * w[j * k + i];
        sum += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(got[r * n + j], sum, k * std::ldexp(mag, -24) + 1e-30)
          << "row " << r << " column " << j;
    }
  }
}

TEST_P(Epilogue, EveryElementOnceInChunksAndPanelsWithTheLoneProductsBitsWithinFp64Bounds) {
  const GemmEngine g;
  std::mt19937 gen(std::random_device{}());
  const MxRow wl{1024};  // 256-column panels (bf16) or 128 (fp32), a last short one
  const int n = 600, k = wl.elems;
  std::vector<std::vector<std::uint8_t>> w_rows;
  std::vector<GemmEngine::Weight> w;
  for (int i = 0; i < 2; ++i) {
    w_rows.push_back(random_rows(gen, n, wl, kShape.format));
    w.push_back(g.load(reinterpret_cast<const std::byte*>(w_rows[i].data()), wl.bytes(), n, k,
                       kShape.format, GetParam()));
  }
  const GemmEngine::Weight* both[] = {&w[0], &w[1]};
  for (const int m : {1, 3, 8, 9, 32, 33, 128, 600}) {
    SCOPED_TRACE(testing::Message() << "m=" << m);
    const auto a_rows = random_rows(gen, m, wl, kShape.format);
    std::vector<std::byte> a(static_cast<std::size_t>(m) * k *
                             GemmEngine::bytes_of(g.input(w[0], m)));
    GemmEngine::expand_rows(reinterpret_cast<const std::byte*>(a_rows.data()), wl.bytes(), m, k,
                            kShape.format, g.input(w[0], m), a.data());
    std::vector<std::vector<float>> got(2, std::vector<float>(static_cast<std::size_t>(m) * n));
    std::vector<int> seen(static_cast<std::size_t>(m) * n, 0);
    int chunk = 0, next_col = 0, panels = 0, chunks = 0;
    g.multiply(both, a.data(), m, [&](const GemmEngine::Panel& p) {
      ++panels;
      ASSERT_EQ(p.r0, chunk);
      ASSERT_EQ(p.c0, next_col);
      ASSERT_GT(p.r1, p.r0);
      ASSERT_LE(p.r1, std::min(m, p.r0 + GemmEngine::kChunkRows));
      ASSERT_GT(p.c1, p.c0);
      if (m <= GemmEngine::kWholeRows) {
        ASSERT_EQ(p.c1 - p.c0, n);
      } else if (p.c1 - p.c0 != n) {
        ASSERT_LE(p.c1 - p.c0, GemmEngine::cut(n, k, GemmEngine::bytes_of(g.input(w[0], m))).cols);
      }
      const int cols = p.c1 - p.c0;
      for (int r = p.r0; r < p.r1; ++r) {
        for (int j = p.c0; j < p.c1; ++j) {
          ++seen[r * n + j];
          for (int i = 0; i < 2; ++i) got[i][r * n + j] = p.out[i][(r - p.r0) * cols + j - p.c0];
        }
      }
      next_col = p.c1 == n ? 0 : p.c1;
      if (p.c1 == n) chunk = p.r1, ++chunks;
    });
    ASSERT_EQ(chunk, m);
    // Expanded FP8 weights are plain rows: panels whatever oneDNN's packed layout.
    if (GetParam() == WeightForm::kFp8 && m > GemmEngine::kWholeRows) {
      ASSERT_GT(panels, chunks);
    }
    ASSERT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(seen.size()));
    for (int i = 0; i < 2; ++i) {
      SCOPED_TRACE(testing::Message() << "weight " << i);
      std::vector<float> alone(got[i].size(), NAN);
      g.multiply(w[i], a.data(), m, alone.data());
      ASSERT_EQ(0, std::memcmp(alone.data(), got[i].data(), sizeof(float) * alone.size()));
      expect_within_fp64(got[i], dequantized(a_rows, m, wl, kShape.format), m,
                         dequantized(w_rows[i], n, wl, kShape.format), n, k);
    }
  }
}

// gemm1_swiglu against gemm1_tile, swiglu_quantize and the expansion of its rows, and gemm2_rows
// on that against gemm2_tile, for m fresh rows at `shape`.
void expect_epilogues_give_separate_passes_bytes(const GemmEngine& g, std::mt19937& gen,
                                                 const ExpertFfnShape& shape, int m,
                                                 WeightForm form) {
  const MxRow tl = shape.token_row(), al = shape.act_row();
  const auto w1 = random_rows(gen, shape.ffn_dim, tl, shape.format);
  const auto w2 = random_rows(gen, shape.model_dim, al, shape.format);
  const auto w = load_expert(g, shape, w1.data(), w2.data(), form);
  const auto tokens = random_rows(gen, m, tl, shape.format);
  const auto* rows = reinterpret_cast<const std::byte*>(tokens.data());
  FfnScratch scratch;
  std::vector<float> h(static_cast<std::size_t>(m) * shape.ffn_dim);
  gemm1_tile(shape, g, w, rows, tl.bytes(), m, h.data(), scratch);
  std::vector<std::byte> act(static_cast<std::size_t>(m) * al.bytes(), std::byte{0});
  swiglu_quantize(shape, h.data(), 0, m, act.data());
  // GEMM2's input: act's rows expanded, and what the fused epilogue writes in their place.
  const GemmInput t = g.input(w.w2, m);
  std::vector<std::byte> in(static_cast<std::size_t>(m) * al.elems * GemmEngine::bytes_of(t));
  std::vector<std::byte> in_fused(in.size(), std::byte{0xff});
  GemmEngine::expand_rows(act.data(), al.bytes(), m, al.elems, shape.format, t, in.data());
  gemm1_swiglu(shape, g, w, rows, tl.bytes(), m, in_fused.data(), scratch);
  ASSERT_EQ(0, std::memcmp(in.data(), in_fused.data(), in.size()));

  const auto D = static_cast<std::size_t>(shape.model_dim);
  std::vector<std::uint16_t> out(m * D), scattered(m * D, 0xffff);
  gemm2_tile(shape, g, w, act.data(), m, out.data(), scratch);
  // Rows to shuffled places, each announced once, in order, when all of it is there.
  std::vector<int> place(m), written;
  for (int r = 0; r < m; ++r) place[r] = (r * 7 + 3) % m;
  if (std::gcd(7, m) != 1) std::iota(place.rbegin(), place.rend(), 0);
  gemm2_rows(
      shape, g, w, in_fused.data(), m,
      {[&](int r) {
         EXPECT_GE(r, static_cast<int>(written.size()));              // not after it was announced
         return OutRow{scattered.data() + place[r] * D, r % 2 == 1};  // every other past the cache
       },
       [&](int r) {
         EXPECT_EQ(0, std::memcmp(out.data() + r * D, scattered.data() + place[r] * D, 2 * D))
             << "row " << r << " announced before all of it was written";
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

TEST_P(Epilogue, Gemm1SwigluAndGemm2RowsGiveTheSeparatePassesBytes) {
  const GemmEngine g;
  std::mt19937 gen(std::random_device{}());
  for (const auto& [shape, m] : {std::pair{kShape, 1},
                                 {kShape, 8},
                                 {kShape, 9},
                                 {kShape, 37},
                                 {kPanelShape, 33},
                                 {kPanelShape, 530}}) {
    SCOPED_TRACE(testing::Message() << "model_dim " << shape.model_dim << ", m=" << m);
    expect_epilogues_give_separate_passes_bytes(g, gen, shape, m, GetParam());
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, Epilogue, ::testing::Values(WeightForm::kFp8, WeightForm::kPacked),
                         [](const auto& info) {
                           return info.param == WeightForm::kFp8 ? "fp8" : "packed";
                         });

}  // namespace
