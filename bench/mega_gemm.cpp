// The GEMM work of one PE's MegaMoE call, alone: the operator's own tile functions (dequantize a
// wave of FP8 rows, then OpenBLAS sgemm) over the waves a PE gets, on one thread, against the
// BLAS's own rate on the same GEMM shapes (one sgemm per expert and weight, no tiling, no
// dequantization). Prints one CSV line:
//   rows,model_dim,ffn_dim,experts,wave_rows,gflop,tiled_ms,blas_ms,tiled_gflops,blas_gflops,efficiency
//   mega_gemm ROWS MODEL_DIM FFN_DIM EXPERTS WAVE_ROWS [REPS]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "moe/expert_ffn.hpp"

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double best_ms(int reps, F&& f) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: mega_gemm ROWS MODEL_DIM FFN_DIM EXPERTS WAVE_ROWS [REPS]\n");
    return 2;
  }
  const int rows = std::atoi(argv[1]), D = std::atoi(argv[2]), F = std::atoi(argv[3]),
            L = std::atoi(argv[4]), W = std::atoi(argv[5]),
            reps = argc > 6 ? std::atoi(argv[6]) : 5;
  if (rows < 1 || D < 1 || F < 2 || F % 2 || L < 1 || W < 1 || reps < 1) {
    std::fprintf(stderr,
                 "mega_gemm: ROWS, MODEL_DIM, EXPERTS, WAVE_ROWS, REPS >= 1; FFN_DIM even\n");
    return 2;
  }
  using namespace shmoe::moe;
  use_single_threaded_blas();
  const ExpertFfnShape shape{D, F, shmoe::numeric::Fp8Format::kE4M3};
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0, 1);
  auto random_rows = [&](int n, const MxRow& layout) {
    std::vector<float> v(static_cast<std::size_t>(layout.elems));
    std::vector<std::uint8_t> out(static_cast<std::size_t>(n) * layout.bytes());
    for (int r = 0; r < n; ++r) {
      for (auto& x : v) x = normal(gen);
      auto* row = out.data() + static_cast<std::size_t>(r) * layout.bytes();
      shmoe::numeric::quantize_mx(v.data(), v.size(), shape.format, row,
                                  row + layout.scales_offset());
    }
    return out;
  };
  const auto w1 = random_rows(F, shape.token_row()), w2 = random_rows(D, shape.act_row());
  const ExpertWeights weights = dequantize_expert(shape, w1.data(), w2.data());
  const auto tokens = random_rows(rows, shape.token_row());
  const auto acts = random_rows(rows, shape.act_row());
  const int per_expert = (rows + L - 1) / L;

  std::vector<float> h(static_cast<std::size_t>(rows) * F);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(rows) * D);
  FfnScratch scratch;
  const double tiled = best_ms(reps, [&] {
    for (int e = 0; e < L; ++e) {
      const int first = e * per_expert, last = std::min(rows, first + per_expert);
      for (int r = first; r < last; r += W) {
        const int n = std::min(W, last - r);
        gemm1_tile(shape, weights,
                   reinterpret_cast<const std::byte*>(tokens.data()) +
                       static_cast<std::size_t>(r) * shape.token_row().bytes(),
                   shape.token_row().bytes(), n, h.data() + static_cast<std::size_t>(r) * F,
                   scratch);
        gemm2_tile(shape, weights,
                   reinterpret_cast<const std::byte*>(acts.data()) +
                       static_cast<std::size_t>(r) * shape.act_row().bytes(),
                   n, out.data() + static_cast<std::size_t>(r) * D, scratch);
      }
    }
  });
  std::vector<float> a(static_cast<std::size_t>(rows) * D, 0.5f),
      a2(static_cast<std::size_t>(rows) * F / 2, 0.5f), o(static_cast<std::size_t>(rows) * D);
  const double blas = best_ms(reps, [&] {
    for (int e = 0; e < L; ++e) {
      const int first = e * per_expert, n = std::min(rows, first + per_expert) - first;
      if (n <= 0) continue;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, F, D, 1.0f,
                  a.data() + static_cast<std::size_t>(first) * D, D, weights.w1.data(), D, 0.0f,
                  h.data() + static_cast<std::size_t>(first) * F, F);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, D, F / 2, 1.0f,
                  a2.data() + static_cast<std::size_t>(first) * F / 2, F / 2, weights.w2.data(),
                  F / 2, 0.0f, o.data() + static_cast<std::size_t>(first) * D, D);
    }
  });
  const double gflop =
      2.0 * rows * (static_cast<double>(D) * F + static_cast<double>(D) * F / 2) / 1e9;
  std::printf("%d,%d,%d,%d,%d,%.4f,%.3f,%.3f,%.2f,%.2f,%.3f\n", rows, D, F, L, W, gflop, tiled,
              blas, gflop / tiled * 1e3, gflop / blas * 1e3, blas / tiled);
  return 0;
}
