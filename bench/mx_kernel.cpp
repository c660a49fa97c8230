// The MX FP8 matrix kernel (numeric/mx_matrix.hpp, what MegaMoE runs on tiles of up to 8 rows)
// alone, on one thread, at 1 to 8 rows of a, in two settings:
//   in cache: one GEMM1 weight cut to 64 rows (at 2048 columns, 130 KB: in L2), multiplied again
//     and again: the products per second its arithmetic allows (1 byte of codes per product and
//     row of a, so at M rows the codes can go no faster than that rate over M);
//   out of cache: EXPERTS experts' GEMM1 and GEMM2 weights (FFN_DIM x MODEL_DIM and MODEL_DIM x
//     FFN_DIM/2) one after the other, as a decode call reads them, against a streaming read of as
//     many bytes on huge pages (common/stream_read.hpp), the runs alternating.
// Prints a '#' line naming the kernel, then one CSV line per row count:
//   rows_of_a,in_cache_gproducts,weights_gbps,read_gbps,weights/read
//   mx_kernel [MODEL_DIM FFN_DIM EXPERTS REPS]   (DeepSeek-V2-Lite's: 2048 2816 9 7)
// Run several at once for PEs that read at the same time.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "common/huge_pages.hpp"
#include "common/stream_read.hpp"
#include "numeric/mx_matrix.hpp"
#include "timing.hpp"

namespace {

using shmoe::numeric::Fp8Format;
using shmoe::numeric::MxWeightMatrix;

// n rows of `cols` random E4M3 values (no NaN) with scales near 1, as a model's weights are.
MxWeightMatrix random_matrix(std::mt19937& rng, int n, int cols) {
  const std::size_t stride = cols + cols / 32;
  std::vector<std::uint8_t> rows(stride * n);
  for (int r = 0; r < n; ++r) {
    std::uint8_t* row = rows.data() + r * stride;
    for (int k = 0; k < cols; ++k) {
      const auto code = static_cast<std::uint8_t>(rng());
      row[k] = (code & 0x7f) == 0x7f ? 0 : code;
    }
    for (int b = 0; b < cols / 32; ++b) row[cols + b] = static_cast<std::uint8_t>(120 + rng() % 8);
  }
  return MxWeightMatrix(rows.data(), stride, n, cols, Fp8Format::kE4M3);
}

}  // namespace

int main(int argc, char** argv) {
  const int D = argc > 1 ? std::atoi(argv[1]) : 2048, F = argc > 2 ? std::atoi(argv[2]) : 2816,
            experts = argc > 3 ? std::atoi(argv[3]) : 9, reps = argc > 4 ? std::atoi(argv[4]) : 7;
  if (D < 32 || D % 32 != 0 || F < 64 || F % 64 != 0 || experts < 1 || reps < 1) {
    std::fprintf(stderr,
                 "usage: mx_kernel [MODEL_DIM (a multiple of 32) FFN_DIM (a multiple of 64) "
                 "EXPERTS (>= 1) REPS (>= 1)]\n");
    return 2;
  }
  constexpr int kMaxRows = 8;
  std::mt19937 rng(std::random_device{}());
  const MxWeightMatrix small = random_matrix(rng, 64, D);
  std::vector<MxWeightMatrix> weights;
  std::size_t bytes = 0;
  for (int e = 0; e < experts; ++e) {
    weights.push_back(random_matrix(rng, F, D));
    weights.push_back(random_matrix(rng, D, F / 2));
    bytes += weights[weights.size() - 2].bytes() + weights.back().bytes();
  }
  const int widest = std::max(D, F / 2) + 64;
  // Rows of a: random bf16 values in [1, 2) (fp32 for the kernels that take it).
  std::vector<std::uint16_t> a16(static_cast<std::size_t>(kMaxRows) * widest);
  std::vector<float> a32(a16.size());
  for (std::size_t i = 0; i < a16.size(); ++i) {
    a16[i] = static_cast<std::uint16_t>(0x3f80 + rng() % 128);
    a32[i] = 1.0f + static_cast<float>(rng() % 128) / 128.0f;
  }
  const void* a = small.row_type() == shmoe::numeric::RowType::kBf16
                      ? static_cast<const void*>(a16.data())
                      : static_cast<const void*>(a32.data());
  std::vector<float> out(static_cast<std::size_t>(kMaxRows) * std::max(D, F));
  std::vector<std::byte, shmoe::HugePageAllocator<std::byte>> buffer(bytes, std::byte{1});
  std::uint64_t sink = 0;

  std::printf("# kernel %s; in cache: 64 x %d; out of cache: %d x (%d x %d + %d x %d), %.1f MB\n",
              shmoe::numeric::matrix_kernel_name(small.kernel()), D, experts, F, D, D, F / 2,
              bytes / 1e6);
  for (int m = 1; m <= kMaxRows; ++m) {
    constexpr int kInCacheCalls = 200;
    const auto in_cache = [&] {
      for (int i = 0; i < kInCacheCalls; ++i) small.times_rows(a, m, out.data(), 64);
    };
    const auto out_of_cache = [&] {
      for (const auto& w : weights) w.times_rows(a, m, out.data(), w.rows());
    };
    const auto read = [&] { sink ^= shmoe::stream_read(buffer.data(), bytes); };
    const auto t = shmoe::bench::alternating_median_ms(reps, {in_cache, out_of_cache, read});
    const double products = 64.0 * D * m * kInCacheCalls;
    const double weights_gbps = bytes / t[1] / 1e6, read_gbps = bytes / t[2] / 1e6;
    std::printf("%d,%.1f,%.2f,%.2f,%.3f\n", m, products / t[0] / 1e6, weights_gbps, read_gbps,
                weights_gbps / read_gbps);
  }
  volatile std::uint64_t keep = sink;  // the reads cannot be left out
  (void)keep;
  return 0;
}
