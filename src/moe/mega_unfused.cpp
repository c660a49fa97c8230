// The unfused MegaMoE chain: the same layer as separate steps with a barrier between each
// (quantize, dispatch_classic, GEMM1, SwiGLU, GEMM2, combine_classic). It is the fused
// operator's reference: the steps call the same expert_ffn functions on the same waves, and
// combine_classic sums like the fused combine, so the outputs must match bit for bit.
#include "moe/mega_unfused.hpp"

#include <shmem.h>

#include <chrono>

namespace shmoe::moe {
namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<MoeBuffer> make_context(const MegaMoEConfig& c, std::size_t recv_cap, int hidden,
                                        DType dtype) {
  MoeConfig m;
  m.experts_per_pe = c.experts_per_pe;
  m.max_bs = c.tokens;
  m.hidden = hidden;
  m.topk = c.topk;
  m.dtype = dtype;
  m.max_recv_rows = recv_cap;
  m.workers = {0, c.workers.vector};
  return std::make_unique<MoeBuffer>(m);
}

// Runs one step on the workers of one kind, each taking items [n * id / count, n * (id+1) / count).
template <typename Step>
void on_workers(kernel::WorkerPool& pool, const kernel::WorkerCounts& counts,
                kernel::WorkerKind kind, std::size_t n, Step&& step) {
  pool.launch(counts, [&](kernel::KernelContext& w) {
    if (w.kind() != kind) return;
    const auto id = static_cast<std::size_t>(w.kind_id());
    const auto count = static_cast<std::size_t>(w.kind_count());
    step(n * id / count, n * (id + 1) / count);
  });
}

}  // namespace

UnfusedChain::UnfusedChain(const MegaMoE::State& s)
    : dispatch_(make_context(s.cfg, s.recv_cap, static_cast<int>(s.shape.token_row().bytes() / 4),
                             DType::kInt32)),
      combine_(make_context(s.cfg, s.recv_cap, s.cfg.model_dim, DType::kBFloat16)) {}

UnfusedChain::~UnfusedChain() = default;

void MegaMoE::run_unfused(const MegaMoEArgs& in) {
  if (!unfused_) unfused_ = std::make_unique<UnfusedChain>(*state_);
  unfused_->run(*state_, in);
}

void UnfusedChain::run(MegaMoE::State& s, const MegaMoEArgs& in) {
  const auto& c = s.cfg;
  const ExpertFfnShape& shape = s.shape;
  const std::size_t token_bytes = shape.token_row().bytes(), act_bytes = shape.act_row().bytes();
  double kernel_us = 0;
  auto timed = [&](auto&& step) {
    const auto t0 = Clock::now();
    step();
    kernel_us += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    shmem_barrier_all();
  };
  const auto T = static_cast<std::size_t>(std::max(in.tokens, 0));
  const bool have_tokens = in.tokens > 0 && in.tokens <= c.tokens && in.x != nullptr;

  // 1. quantize
  timed([&] {
    if (!have_tokens) return;
    on_workers(*s.pool, c.workers, kernel::WorkerKind::kVector, T,
               [&](std::size_t a, std::size_t b) {
                 quantize_tokens(shape, in.x + a * c.model_dim, b - a,
                                 s.my_rows.data() + a * token_bytes, token_bytes);
               });
  });

  // 2. dispatch
  const std::size_t cap = s.recv_cap;
  rows_.resize(cap * token_bytes);
  assist_.resize(3 * cap);
  recv_count_.resize(static_cast<std::size_t>(c.experts_per_pe) * s.n_pes);
  expert_nums_.resize(c.experts_per_pe);
  auto& rows = rows_;
  auto& assist = assist_;
  auto& recv_count = recv_count_;
  auto& expert_nums = expert_nums_;
  int received = 0;
  timed([&] {
    received = dispatch_classic(
        *dispatch_, {s.my_rows.data(), in.expert_ids, nullptr, in.tokens},
        {rows.data(), assist.data(), recv_count.data(), expert_nums.data(), nullptr});
  });
  if (in.expert_token_counts != nullptr)
    std::copy(expert_nums.begin(), expert_nums.end(), in.expert_token_counts);
  const std::vector<Wave> waves =
      cut_waves(std::vector<std::int64_t>(expert_nums.begin(), expert_nums.end()), c.wave_rows);
  const auto R = static_cast<std::size_t>(received);

  // Runs `tile(wave, scratch)` for every wave, the waves split over the matrix workers.
  auto on_waves = [&](auto&& tile) {
    timed([&] {
      on_workers(*s.pool, c.workers, kernel::WorkerKind::kMatrix, waves.size(),
                 [&](std::size_t a, std::size_t b) {
                   FfnScratch scratch;
                   for (std::size_t v = a; v < b; ++v) tile(waves[v], scratch);
                 });
    });
  };

  // 3. GEMM1, wave by wave
  auto& h = h_;
  h.resize(R * c.ffn_dim);
  on_waves([&](const Wave& w, FfnScratch& scratch) {
    gemm1_tile(shape, s.gemm, s.weights[w.expert], rows.data() + w.row0 * token_bytes, token_bytes,
               w.rows, h.data() + w.row0 * c.ffn_dim, scratch);
  });

  // 4. SwiGLU and re-quantization, row by row
  auto& act = act_;
  act.resize(R * act_bytes);
  timed([&] {
    on_workers(
        *s.pool, c.workers, kernel::WorkerKind::kVector, R, [&](std::size_t a, std::size_t b) {
          swiglu_quantize(shape, h.data(), static_cast<int>(a), static_cast<int>(b), act.data());
        });
  });

  // 5. GEMM2, wave by wave
  auto& out = out_;
  out.resize(R * c.model_dim);
  on_waves([&](const Wave& w, FfnScratch& scratch) {
    gemm2_tile(shape, s.gemm, s.weights[w.expert], act.data() + w.row0 * act_bytes, w.rows,
               out.data() + w.row0 * c.model_dim, scratch);
  });

  // 6. combine
  timed([&] {
    combine_classic(*combine_, {out.data(), assist.data(), recv_count.data(), in.expert_ids,
                                in.routing_weights, in.tokens, in.y});
  });
  s.kernel_us = kernel_us;
}

}  // namespace shmoe::moe
