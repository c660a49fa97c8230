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

// One run of the chain, a method per step; each step is timed and ends at a barrier.
class UnfusedChain::Call {
 public:
  Call(UnfusedChain& chain, MegaMoE::State& s, const MegaMoEArgs& in)
      : ch_(chain),
        s_(s),
        in_(in),
        c_(s.cfg),
        shape_(s.shape),
        token_bytes_(shape_.token_row().bytes()),
        act_bytes_(shape_.act_row().bytes()) {}

  void run() {
    quantize();
    dispatch();
    gemm1();
    swiglu();
    gemm2();
    combine();
    s_.kernel_us = kernel_us_;
  }

 private:
  template <typename Step>
  void timed(Step&& step) {
    const auto t0 = Clock::now();
    step();
    kernel_us_ += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    shmem_barrier_all();
  }

  // Runs `tile(wave, scratch)` for every wave, the waves split over the matrix workers.
  template <typename Tile>
  void on_waves(Tile&& tile) {
    timed([&] {
      on_workers(*s_.pool, c_.workers, kernel::WorkerKind::kMatrix, waves_.size(),
                 [&](std::size_t a, std::size_t b) {
                   FfnScratch scratch;
                   for (std::size_t v = a; v < b; ++v) tile(waves_[v], scratch);
                 });
    });
  }

  // 1. quantize
  void quantize() {
    const auto T = static_cast<std::size_t>(std::max(in_.tokens, 0));
    const bool have_tokens = in_.tokens > 0 && in_.tokens <= c_.tokens && in_.x != nullptr;
    timed([&] {
      if (!have_tokens) return;
      on_workers(*s_.pool, c_.workers, kernel::WorkerKind::kVector, T,
                 [&](std::size_t a, std::size_t b) {
                   quantize_tokens(shape_, in_.x + a * c_.model_dim, b - a,
                                   s_.my_rows.data() + a * token_bytes_, token_bytes_);
                 });
    });
  }

  // 2. dispatch, then the waves of the rows received
  void dispatch() {
    const std::size_t cap = s_.recv_cap;
    ch_.rows_.resize(cap * token_bytes_);
    ch_.assist_.resize(3 * cap);
    ch_.recv_count_.resize(static_cast<std::size_t>(c_.experts_per_pe) * s_.n_pes);
    ch_.expert_nums_.resize(c_.experts_per_pe);
    const auto& expert_nums = ch_.expert_nums_;
    int received = 0;
    timed([&] {
      received =
          dispatch_classic(*ch_.dispatch_, {s_.my_rows.data(), in_.expert_ids, nullptr, in_.tokens},
                           {ch_.rows_.data(), ch_.assist_.data(), ch_.recv_count_.data(),
                            ch_.expert_nums_.data(), nullptr});
    });
    if (in_.expert_token_counts != nullptr)
      std::copy(expert_nums.begin(), expert_nums.end(), in_.expert_token_counts);
    waves_ =
        cut_waves(std::vector<std::int64_t>(expert_nums.begin(), expert_nums.end()), c_.wave_rows);
    R_ = static_cast<std::size_t>(received);
  }

  // 3. GEMM1, wave by wave
  void gemm1() {
    ch_.h_.resize(R_ * c_.ffn_dim);
    on_waves([&](const Wave& w, FfnScratch& scratch) {
      gemm1_tile(shape_, s_.gemm, s_.weights[w.expert], ch_.rows_.data() + w.row0 * token_bytes_,
                 token_bytes_, w.rows, ch_.h_.data() + w.row0 * c_.ffn_dim, scratch);
    });
  }

  // 4. SwiGLU and re-quantization, row by row
  void swiglu() {
    ch_.act_.resize(R_ * act_bytes_);
    timed([&] {
      on_workers(*s_.pool, c_.workers, kernel::WorkerKind::kVector, R_,
                 [&](std::size_t a, std::size_t b) {
                   swiglu_quantize(shape_, ch_.h_.data(), static_cast<int>(a), static_cast<int>(b),
                                   ch_.act_.data());
                 });
    });
  }

  // 5. GEMM2, wave by wave
  void gemm2() {
    ch_.out_.resize(R_ * c_.model_dim);
    on_waves([&](const Wave& w, FfnScratch& scratch) {
      gemm2_tile(shape_, s_.gemm, s_.weights[w.expert], ch_.act_.data() + w.row0 * act_bytes_,
                 w.rows, ch_.out_.data() + w.row0 * c_.model_dim, scratch);
    });
  }

  // 6. combine
  void combine() {
    timed([&] {
      combine_classic(*ch_.combine_, {ch_.out_.data(), ch_.assist_.data(), ch_.recv_count_.data(),
                                      in_.expert_ids, in_.routing_weights, in_.tokens, in_.y});
    });
  }

  UnfusedChain& ch_;
  MegaMoE::State& s_;
  const MegaMoEArgs& in_;
  const MegaMoEConfig& c_;
  const ExpertFfnShape& shape_;
  const std::size_t token_bytes_, act_bytes_;
  double kernel_us_ = 0;
  std::vector<Wave> waves_;
  std::size_t R_ = 0;  // rows received
};

void UnfusedChain::run(MegaMoE::State& s, const MegaMoEArgs& in) {
  Call call(*this, s, in);
  call.run();
}

}  // namespace shmoe::moe
