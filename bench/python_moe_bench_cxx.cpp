// The C++ side of bench/python_moe_bench.sh: dispatch + combine through the C++ API
// (moe/moe.hpp), timed exactly as bench/python_moe_bench.py times the Python binding: a
// barrier, then the host clock around one dispatch and one combine (the received rows go back
// as the experts' output), with buffers allocated once.
//   shmoerun -n P python_moe_bench_cxx TOKENS HIDDEN TOPK EXPERTS_PER_PE WARMUP LOOPS
#include <shmem.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "moe/moe.hpp"

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s TOKENS HIDDEN TOPK EXPERTS_PER_PE WARMUP LOOPS\n", argv[0]);
    return 2;
  }
  const int tokens = std::atoi(argv[1]), hidden = std::atoi(argv[2]), topk = std::atoi(argv[3]),
            per_pe = std::atoi(argv[4]), warmup = std::atoi(argv[5]), loops = std::atoi(argv[6]);
  int provided = 0;
  shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);
  const int me = shmem_my_pe(), n = shmem_n_pes(), experts = n * per_pe;

  namespace moe = shmoe::moe;
  {  // the context goes (collectively) before shmem_finalize
    moe::MoeConfig c;
    c.experts_per_pe = per_pe;
    c.max_bs = tokens;
    c.hidden = hidden;
    c.topk = topk;
    c.dtype = moe::DType::kBFloat16;
    moe::MoeBuffer ctx(c);
    const std::size_t cap = ctx.recv_capacity(), row = static_cast<std::size_t>(hidden) * 2;

    std::mt19937 rng(1234 + me);
    std::vector<std::uint16_t> x(static_cast<std::size_t>(tokens) * hidden);
    for (auto& v : x) v = static_cast<std::uint16_t>(0x3f80 + rng() % 128);  // bf16 in [1, 2)
    std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens) * topk);
    std::vector<float> weights(ids.size());
    std::vector<int> order(experts);
    for (int t = 0; t < tokens; ++t) {
      for (int e = 0; e < experts; ++e) order[e] = e;
      std::shuffle(order.begin(), order.end(), rng);
      for (int k = 0; k < topk; ++k) {
        ids[t * topk + k] = order[k];
        weights[t * topk + k] = static_cast<float>(rng() % 1000) / 1000.0f;
      }
    }
    std::vector<std::byte> expand_x(cap * row), out(static_cast<std::size_t>(tokens) * row);
    std::vector<std::int32_t> assist(cap * 3), recv_count(static_cast<std::size_t>(n) * per_pe),
        token_nums(per_pe);
    std::vector<float> scales(cap);

    std::vector<double> us;
    for (int i = 0; i < warmup + loops; ++i) {
      shmem_barrier_all();
      const auto t0 = std::chrono::steady_clock::now();
      moe::dispatch_classic(
          ctx, {x.data(), ids.data(), weights.data(), tokens},
          {expand_x.data(), assist.data(), recv_count.data(), token_nums.data(), scales.data()});
      moe::combine_classic(ctx, {expand_x.data(), assist.data(), recv_count.data(), ids.data(),
                                 weights.data(), tokens, out.data()});
      const auto t1 = std::chrono::steady_clock::now();
      if (i >= warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    double mean = 0;
    for (double v : us) mean += v / static_cast<double>(us.size());
    std::sort(us.begin(), us.end());
    // The slowest PE's mean and median.
    auto* stats = static_cast<double*>(shmem_calloc(4, sizeof(double)));
    stats[0] = mean;
    stats[1] = us[us.size() / 2];
    shmem_double_max_reduce(SHMEM_TEAM_WORLD, stats + 2, stats, 2);
    if (me == 0) std::printf("cxx: pes=%d mean_us=%.1f median_us=%.1f\n", n, stats[2], stats[3]);
    shmem_free(stats);
  }
  shmem_finalize();
  return 0;
}
