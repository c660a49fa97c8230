// The GEMM work of one PE's MegaMoE call alone, on one thread: the operator's own tile functions
// (expand a wave of MX FP8 rows, run the packed-weight GEMM; GEMM2 also converts to BF16) over the
// waves a PE gets, against the limit, oneDNN's own matmul on the same GEMM shapes (one per expert
// and weight, untiled, inputs already in the kernel's type, weights prepacked, nothing else), and
// the weight bytes those GEMMs read against memcpy's bandwidth on as many bytes, measured in the
// same run. Times are medians of REPS runs of each, alternating. Prints a '#' line naming the
// kernel, then one CSV line:
//   rows,model_dim,ffn_dim,experts,wave_rows,gflop,tiled_ms,limit_ms,tiled_gflops,limit_gflops,
//   tiled/limit,weight_bytes,weight_gbps,memcpy_gbps,weight/memcpy,read_gbps,weight/read
//   mega_gemm ROWS MODEL_DIM FFN_DIM EXPERTS WAVE_ROWS [REPS [tiles|limit|all [bf16|fp8]]]
// The tiles read the weights in the form named last (mega_gemm.hpp; default bf16, packed); the
// read is a streaming read of as many bytes as those weights take (reading, not copying).
// With a KIND other than all, runs only that one REPS times, each after an untimed streaming read
// of the weights' bytes (as `shmoe-moe mega` times its calls), and prints "KIND,mean_ms": for
// several processes at once (PEs outnumbering cores), whose individual runs are cut into by the
// others' time slices while a long loop's mean is their fair share.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/huge_pages.hpp"
#include "common/stream_read.hpp"
#include "moe/expert_ffn.hpp"
#include "timing.hpp"

namespace {

using shmoe::bench::alternating_median_ms;
using shmoe::bench::ms_of;

// oneDNN's matmul as a user would call it: out[m][n] = a[m][k] . w[k][n], weights in the layout
// it asks for (reordered once, outside the timing).
class PlainMatmul {
 public:
  PlainMatmul(const dnnl::engine& eng, dnnl::memory::data_type type, int m, int n, int k)
      : eng_(eng) {
    using dnnl::memory;
    const memory::desc a({m, k}, type, memory::format_tag::ab),
        w({k, n}, type, memory::format_tag::any),
        out({m, n}, memory::data_type::f32, memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, w, out), eng);
    prim_ = dnnl::matmul(pd);
    a_ = memory(a, eng);
    w_ = memory(pd.weights_desc(), eng);
    out_ = memory(out, eng);
    std::memset(a_.get_data_handle(), 0, a.get_size());
    std::memset(w_.get_data_handle(), 0, pd.weights_desc().get_size());
  }
  void run(dnnl::stream& s) {
    prim_.execute(s, {{DNNL_ARG_SRC, a_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DST, out_}});
    s.wait();
  }

 private:
  dnnl::engine eng_;
  dnnl::matmul prim_;
  dnnl::memory a_, w_, out_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: mega_gemm ROWS MODEL_DIM FFN_DIM EXPERTS WAVE_ROWS [REPS [tiles|limit|all "
                 "[bf16|fp8]]]\n");
    return 2;
  }
  const int rows = std::atoi(argv[1]), D = std::atoi(argv[2]), F = std::atoi(argv[3]),
            L = std::atoi(argv[4]), W = std::atoi(argv[5]),
            reps = argc > 6 ? std::atoi(argv[6]) : 7;
  const std::string kind = argc > 7 ? argv[7] : "all", form = argc > 8 ? argv[8] : "bf16";
  if (rows < 1 || D < 1 || F < 2 || F % 2 || L < 1 || W < 1 || reps < 1 ||
      (kind != "all" && kind != "tiles" && kind != "limit") || (form != "bf16" && form != "fp8")) {
    std::fprintf(stderr,
                 "mega_gemm: ROWS, MODEL_DIM, EXPERTS, WAVE_ROWS, REPS >= 1; FFN_DIM even; KIND "
                 "tiles, limit or all; weights bf16 or fp8\n");
    return 2;
  }
  using namespace shmoe::moe;
  omp_set_num_threads(1);  // one thread per PE, as in the layer
  const GemmEngine engine;
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
  std::vector<ExpertWeights> weights;
  for (int e = 0; e < L; ++e) {
    const auto w1 = random_rows(F, shape.token_row()), w2 = random_rows(D, shape.act_row());
    weights.push_back(load_expert(engine, shape, w1.data(), w2.data(),
                                  form == "fp8" ? WeightForm::kFp8 : WeightForm::kPacked));
  }
  const auto tokens = random_rows(rows, shape.token_row());
  const auto acts = random_rows(rows, shape.act_row());
  const int per_expert = (rows + L - 1) / L;
  auto expert_rows = [&](int e) {
    const int first = e * per_expert;
    return std::pair{first, std::max(0, std::min(rows, first + per_expert) - first)};
  };

  std::vector<float> h(static_cast<std::size_t>(rows) * F);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(rows) * D);
  FfnScratch scratch;
  auto run_tiles = [&] {
    for (int e = 0; e < L; ++e) {
      const auto [first, n_e] = expert_rows(e);
      for (int r = first; r < first + n_e; r += W) {
        const int n = std::min(W, first + n_e - r);
        gemm1_tile(shape, engine, weights[e],
                   reinterpret_cast<const std::byte*>(tokens.data()) +
                       static_cast<std::size_t>(r) * shape.token_row().bytes(),
                   shape.token_row().bytes(), n, h.data() + static_cast<std::size_t>(r) * F,
                   scratch);
        gemm2_tile(shape, engine, weights[e],
                   reinterpret_cast<const std::byte*>(acts.data()) +
                       static_cast<std::size_t>(r) * shape.act_row().bytes(),
                   n, out.data() + static_cast<std::size_t>(r) * D, scratch);
      }
    }
  };
  run_tiles();  // makes the kernels

  const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(eng);
  const auto type = engine.input() == GemmInput::kBf16 ? dnnl::memory::data_type::bf16
                                                       : dnnl::memory::data_type::f32;
  std::vector<PlainMatmul> plain;
  std::size_t weight_bytes = 0;
  for (int e = 0; e < L; ++e) {
    const int n_e = expert_rows(e).second;
    if (n_e == 0) continue;
    plain.emplace_back(eng, type, n_e, F, D);
    plain.emplace_back(eng, type, n_e, D, F / 2);
    weight_bytes += weights[e].bytes();
  }
  auto run_plain = [&] {
    for (auto& p : plain) p.run(stream);
  };
  run_plain();

  // The source on huge pages, as the FP8 weights are (common/stream_read.hpp says why).
  std::vector<std::byte, shmoe::HugePageAllocator<std::byte>> src(weight_bytes, std::byte{1});
  std::uint64_t sink = 0;
  if (kind != "all") {
    const auto& run = kind == "tiles" ? std::function<void()>(run_tiles) : run_plain;
    // The read, so that each run finds the caches a timed call of the layer finds. Without it
    // the limit ran 1.6% faster and the layer 1.5% (medians of 8 alternating rounds each, 2 PEs
    // at decode): comparing the two loops as they were put that on the layer.
    double ms = 0;
    for (int r = 0; r < reps; ++r) {
      sink ^= shmoe::stream_read(src.data(), weight_bytes);
      ms += ms_of(run);
    }
    std::printf("%s,%.4f\n", kind.c_str(), ms / reps);
    return sink == 42 ? 1 : 0;
  }

  std::vector<std::byte> dst(weight_bytes);
  auto copy_weights = [&] {
    // Several copies per sample: one is too short for the clock at small sizes.
    for (int i = 0; i < 4; ++i) {
      std::memcpy(dst.data(), src.data(), weight_bytes);
      asm volatile("" : : "r"(dst.data()) : "memory");
    }
  };
  auto read_weights = [&] {
    for (int i = 0; i < 4; ++i) sink ^= shmoe::stream_read(src.data(), weight_bytes);
  };
  const auto t = alternating_median_ms(reps, {run_tiles, run_plain, copy_weights, read_weights});
  const double tiled = t[0], limit = t[1], copy = t[2] / 4, read = t[3] / 4;

  const double gflop =
      2.0 * rows * (static_cast<double>(D) * F + static_cast<double>(D) * F / 2) / 1e9;
  std::printf("# %s; kernel for the tiles: %s\n", engine.describe().c_str(),
              engine.kernel_name(std::min(W, per_expert), F, D).c_str());
  std::printf("%d,%d,%d,%d,%d,%.4f,%.4f,%.4f,%.2f,%.2f,%.3f,%zu,%.2f,%.2f,%.3f,%.2f,%.3f\n", rows,
              D, F, L, W, gflop, tiled, limit, gflop / tiled * 1e3, gflop / limit * 1e3,
              tiled / limit, weight_bytes, weight_bytes / tiled / 1e6, weight_bytes / copy / 1e6,
              copy / tiled, weight_bytes / read / 1e6, read / tiled);
  return sink == 42 ? 1 : 0;  // never: keeps the reads
}
