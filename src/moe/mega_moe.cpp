// MegaMoE's set-up: configuration checks, the symmetric window, the weights, and the pieces the
// fused operator and the unfused chain share (waves, call header).
#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>

#include "common/backoff.hpp"
#include "moe/config_check.hpp"
#include "moe/mega_unfused.hpp"

namespace shmoe::moe {
namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw Refused("MegaMoE: " + what);
}

// kOverlapped where this PE's share of its host's cores runs all its workers at once, kSolo where
// the share is under two cores (one thread at a time), kInline in between.
MegaSchedule schedule_for_cores(const kernel::WorkerCounts& workers) {
  const int pes_here = std::max(1, shmem_team_n_pes(SHMEM_TEAM_SHARED));
  const int cores = wait_policy().cores;
  if (cores >= pes_here * workers.total()) return MegaSchedule::kOverlapped;
  return cores < 2 * pes_here ? MegaSchedule::kSolo : MegaSchedule::kInline;
}

std::size_t recv_capacity(const MegaMoEConfig& c, int n_pes) {
  return c.max_received_tokens ? c.max_received_tokens
                               : static_cast<std::size_t>(n_pes) * c.tokens * c.topk;
}

// Automatic wave rows: 128 where the overlapped schedule hands every wave between workers
// (hand-overs per wave), 512 where one thread runs a wave's GEMMs and epilogues back to back
// (oneDNN's tiles at DeepSeek-V2-Lite's expert shape: 1.09x an untiled matmul at 128 rows,
// 1.054x at 512; no difference at the small shape).
constexpr int kWaveRowsHandedOver = 128, kWaveRowsOneThread = 512;

int auto_wave_rows(MegaSchedule resolved) {
  return resolved == MegaSchedule::kOverlapped ? kWaveRowsHandedOver : kWaveRowsOneThread;
}

// Each expert adds at most one partial wave. Sized from the config as given, with automatic
// waves at their shortest: every PE's window is the same size whatever its waves resolve to.
std::size_t max_waves(const MegaMoEConfig& c, std::size_t recv_cap) {
  return recv_cap / (c.wave_rows != 0 ? c.wave_rows : kWaveRowsHandedOver) + c.experts_per_pe;
}

struct Window {
  std::size_t headers, combine_done, arrivals, recv_rows, combine_rows, total;
};

Window window_layout(const MegaMoEConfig& c, int n_pes) {
  const ExpertFfnShape shape{c.model_dim, c.ffn_dim, c.format};
  const std::size_t cap = recv_capacity(c, n_pes);
  WindowLayout l;
  Window w;
  w.headers = l.take(HeaderExchange::bytes(n_pes, c.experts_per_pe));
  w.combine_done = l.take(FlagArray::bytes(n_pes));
  w.arrivals = l.take(max_waves(c, cap) * 64);
  w.recv_rows = l.take(cap * row_slot_bytes(shape));
  w.combine_rows = l.take(static_cast<std::size_t>(c.tokens) * c.topk * c.model_dim * 2);
  w.total = l.total();
  return w;
}

}  // namespace

std::vector<Wave> cut_waves(const std::vector<std::int64_t>& rows_per_expert, int wave_rows) {
  std::vector<Wave> waves;
  std::int64_t start = 0;
  for (std::size_t e = 0; e < rows_per_expert.size(); ++e) {
    for (std::int64_t r = 0; r < rows_per_expert[e]; r += wave_rows) {
      const auto n = static_cast<int>(std::min<std::int64_t>(wave_rows, rows_per_expert[e] - r));
      waves.push_back({static_cast<int>(e), start + r, n});
    }
    start += rows_per_expert[e];
  }
  return waves;
}

CallHeader mega_header(const MegaMoE::State& s, const MegaMoEArgs& in, std::int32_t* counts) {
  const auto& c = s.cfg;
  CallHeader h;
  h.hidden = c.model_dim;
  h.ffn = c.ffn_dim;
  h.topk = c.topk;
  h.experts_per_pe = c.experts_per_pe;
  h.dtype = static_cast<std::int32_t>(c.format);
  h.bs = in.tokens;
  h.wave_rows = c.wave_rows;
  const bool inputs_missing = in.tokens > 0 && (in.x == nullptr || in.expert_ids == nullptr ||
                                                in.routing_weights == nullptr || in.y == nullptr);
  fill_route_header(h, counts, inputs_missing ? nullptr : in.expert_ids,
                    inputs_missing ? 0 : in.tokens, c.tokens, c.topk, s.experts());
  if (h.error != InputError::kNone) return h;
  if (inputs_missing) {
    refuse_null(h, in.x == nullptr                 ? Tensor::kX
                   : in.expert_ids == nullptr      ? Tensor::kExpertIds
                   : in.routing_weights == nullptr ? Tensor::kRoutingWeights
                                                   : Tensor::kY);
  }
  return h;
}

MegaMoE::MegaMoE(const MegaMoEConfig& config, const MegaMoEWeights& weights)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  if (const std::string e = config_error(config, s.n_pes); !e.empty()) refuse(e);
  s.cfg = config;
  if (s.cfg.workers.total() == 0) s.cfg.workers = {1, 2};
  if (s.cfg.schedule == MegaSchedule::kAuto) s.cfg.schedule = schedule_for_cores(s.cfg.workers);
  if (s.cfg.wave_rows == 0) s.cfg.wave_rows = auto_wave_rows(s.cfg.schedule);
  if (s.cfg.weights == MegaWeights::kAuto) {
    const bool few_rows = static_cast<long long>(s.cfg.tokens) * s.cfg.topk <=
                          static_cast<long long>(kFp8RowsPerExpert) * s.cfg.experts_per_pe;
    s.cfg.weights = few_rows ? MegaWeights::kFp8 : MegaWeights::kBf16;
  }
  const auto& c = s.cfg;
  s.shape = {c.model_dim, c.ffn_dim, c.format};
  if (weights.w1.size() != static_cast<std::size_t>(c.experts_per_pe) ||
      weights.w2.size() != weights.w1.size()) {
    refuse(fmt::format("weights for {} and {} experts given, expected num_experts_per_pe={}",
                       weights.w1.size(), weights.w2.size(), c.experts_per_pe));
  }
  for (int e = 0; e < c.experts_per_pe; ++e) {
    if (weights.w1[e] == nullptr || weights.w2[e] == nullptr)
      refuse(fmt::format("weights of local expert {} are null", e));
  }

  s.recv_cap = recv_capacity(c, s.n_pes);
  s.max_waves = max_waves(config, s.recv_cap);
  const Window wl = window_layout(config, s.n_pes);
  if (!s.open_window(wl.total, {wl.headers, wl.combine_done, wl.recv_rows, wl.combine_rows},
                     c.experts_per_pe)) {
    refuse(fmt::format(
        "the symmetric window needs {} bytes per PE ({} received rows of {} bytes, {} combine "
        "rows of {} bytes), more than is free in the symmetric heap: raise SHMEM_SYMMETRIC_SIZE "
        "or lower max_tokens_per_pe, hidden or max_recv_rows (MAX_RECEIVED_TOKENS)",
        wl.total, s.recv_cap, row_slot_bytes(s.shape), static_cast<std::size_t>(c.tokens) * c.topk,
        c.model_dim * 2));
  }
  s.wave_arrivals = reinterpret_cast<std::uint64_t*>(s.window + wl.arrivals);
  s.arrivals_seen.assign(s.max_waves, 0);

  s.pool = std::make_unique<kernel::WorkerPool>(c.workers.total());
  // Loaded by the matrix workers, which run the GEMMs: oneDNN's packing stays on their threads,
  // and each worker's experts are first touched where they will be read.
  s.weights.resize(c.experts_per_pe);
  s.pool->launch(c.workers, [&](kernel::KernelContext& w) {
    if (w.kind() != kernel::WorkerKind::kMatrix) return;
    for (int e = w.kind_id(); e < c.experts_per_pe; e += w.kind_count())
      s.weights[e] =
          load_expert(s.gemm, s.shape, weights.w1[e], weights.w2[e],
                      c.weights == MegaWeights::kFp8 ? WeightForm::kFp8 : WeightForm::kPacked);
  });
  s.row_slot = row_slot_bytes(s.shape);
  s.my_rows.resize(static_cast<std::size_t>(c.tokens) * s.row_slot);
  // Only waves handed between workers keep GEMM1's fp32 output, the activations and GEMM2's BF16
  // rows in memory; a worker that runs its waves itself (inline, solo) keeps GEMM2's input alone,
  // the GEMMs' epilogues taking the rest from cache (its type may be wider for a few rows).
  const bool handed_over = c.schedule == MegaSchedule::kOverlapped;
  const int W = c.wave_rows;
  const std::size_t widest = std::max(GemmEngine::bytes_of(s.gemm.input(s.weights[0].w2, W)),
                                      GemmEngine::bytes_of(s.gemm.input(s.weights[0].w2, 1)));
  const std::size_t gemm2_in =
      handed_over ? 0 : static_cast<std::size_t>(W) * s.shape.act_row().elems * widest;
  for (int m = 0; m < c.workers.matrix; ++m) {
    auto t = std::make_unique<TileSlots>();
    t->gemm2_in.resize(gemm2_in);
    for (int p = 0; p < 2 && handed_over; ++p) {
      t->act[p].resize(static_cast<std::size_t>(W) * s.shape.act_row().bytes());
      t->h[p].resize(static_cast<std::size_t>(W) * c.ffn_dim);
      t->out[p].resize(static_cast<std::size_t>(W) * c.model_dim);
    }
    s.slots.push_back(std::move(t));
  }
}

MegaMoE::~MegaMoE() {
  unfused_.reset();
  state_->close();
}

const MegaMoEConfig& MegaMoE::config() const {
  return state_->cfg;
}
std::string MegaMoE::gemm_engine() const {
  return state_->gemm.describe();
}
std::size_t MegaMoE::weight_bytes() const {
  std::size_t bytes = 0;
  for (const auto& w : state_->weights) bytes += w.bytes();
  return bytes;
}
double MegaMoE::last_kernel_us() const {
  return state_->kernel_us;
}
void MegaMoE::set_tracing(bool on) {
  state_->trace.set_enabled(on);
}
std::vector<kernel::StageEvent> MegaMoE::last_trace() const {
  return state_->trace.events();
}

std::size_t MegaMoE::symmetric_bytes(const MegaMoEConfig& config, int n_pes, bool unfused) {
  std::size_t bytes = window_layout(config, n_pes).total;
  if (unfused) {
    const ExpertFfnShape shape{config.model_dim, config.ffn_dim, config.format};
    MoeConfig d;
    d.experts_per_pe = config.experts_per_pe;
    d.max_bs = config.tokens;
    d.topk = config.topk;
    d.hidden = static_cast<int>(shape.token_row().bytes() / 4);
    d.dtype = DType::kInt32;
    d.max_recv_rows = recv_capacity(config, n_pes);
    MoeConfig cb = d;
    cb.hidden = config.model_dim;
    cb.dtype = DType::kBFloat16;
    bytes += MoeBuffer::window_bytes(d, n_pes) + MoeBuffer::window_bytes(cb, n_pes);
  }
  return bytes;
}

}  // namespace shmoe::moe
