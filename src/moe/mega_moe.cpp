// MegaMoe's set-up: configuration checks, the symmetric window, the weights, and the pieces the
// fused operator and the unfused chain share (waves, call header).
#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>

#include "common/backoff.hpp"
#include "moe/mega_state.hpp"

namespace shmoe::moe {
namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw MoeError("MegaMoe: " + what);
}

void validate(const MegaMoeConfig& c, int n_pes) {
  if (c.tokens < 0 || c.tokens > (1 << 20))
    refuse(fmt::format("tokens={} is out of range (0..{})", c.tokens, 1 << 20));
  if (c.model_dim < 1 || c.model_dim > (1 << 16))
    refuse(fmt::format("model_dim={} is out of range (1..{})", c.model_dim, 1 << 16));
  if (c.ffn_dim < 2 || c.ffn_dim > (1 << 17) || c.ffn_dim % 2 != 0) {
    refuse(fmt::format("ffn_dim={} must be even and in 2..{} (SwiGLU splits it in two halves)",
                       c.ffn_dim, 1 << 17));
  }
  if (c.experts_per_pe < 1 || c.experts_per_pe > 1024)
    refuse(fmt::format("experts_per_pe={} is out of range (1..1024)", c.experts_per_pe));
  const int experts = n_pes * c.experts_per_pe;
  if (c.topk < 1 || c.topk > experts) {
    refuse(fmt::format("topk={} is out of range (1..{}, the expert count {} PEs x {} experts)",
                       c.topk, experts, n_pes, c.experts_per_pe));
  }
  const auto& w = c.workers;
  if (w.total() != 0 && (w.matrix < 1 || w.vector != 2 * w.matrix || w.matrix > 64)) {
    refuse(fmt::format(
        "workers matrix={} vector={}: give both or neither, with vector = 2 x matrix and matrix "
        "in 1..64 (AIC_NUM/AIV_NUM)",
        w.matrix, w.vector));
  }
  if (c.wave_rows < 1 || c.wave_rows > 4096)
    refuse(fmt::format("wave_rows={} is out of range (1..4096)", c.wave_rows));
  if (static_cast<int>(c.schedule) > static_cast<int>(MegaSchedule::kInline)) {
    refuse(fmt::format("schedule={} is not a MegaSchedule (0 auto, 1 overlapped, 2 inline)",
                       static_cast<int>(c.schedule)));
  }
}

// Whether this PE's share of its host's cores can run all its workers at once.
bool workers_fit_cores(const kernel::WorkerCounts& workers) {
  const int pes_here = std::max(1, shmem_team_n_pes(SHMEM_TEAM_SHARED));
  return wait_policy().cores >= pes_here * workers.total();
}

std::size_t recv_capacity(const MegaMoeConfig& c, int n_pes) {
  return c.max_received_tokens ? c.max_received_tokens
                               : static_cast<std::size_t>(n_pes) * c.tokens * c.topk;
}

// Each expert adds at most one partial wave.
std::size_t max_waves(const MegaMoeConfig& c, std::size_t recv_cap) {
  return recv_cap / c.wave_rows + c.experts_per_pe;
}

struct Window {
  std::size_t headers, combine_done, arrivals, recv_rows, recv_meta, combine_rows, total;
};

Window window_layout(const MegaMoeConfig& c, int n_pes) {
  const ExpertFfnShape shape{c.model_dim, c.ffn_dim, c.format};
  const std::size_t cap = recv_capacity(c, n_pes);
  WindowLayout l;
  Window w;
  w.headers = l.take(HeaderExchange::bytes(n_pes, c.experts_per_pe));
  w.combine_done = l.take(FlagArray::bytes(n_pes));
  w.arrivals = l.take(max_waves(c, cap) * 64);
  w.recv_rows = l.take(cap * shape.token_row().bytes());
  w.recv_meta = l.take(cap * sizeof(RowMeta));
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

CallHeader mega_header(const MegaMoe::State& s, const MegaMoeArgs& in, std::int32_t* counts) {
  const auto& c = s.cfg;
  CallHeader h;
  h.hidden = c.model_dim;
  h.ffn = c.ffn_dim;
  h.topk = c.topk;
  h.experts_per_pe = c.experts_per_pe;
  h.dtype = 100 + static_cast<std::int32_t>(c.format);  // distinct from dispatch's DType codes
  h.bs = in.tokens;
  const bool inputs_missing = in.tokens > 0 && (in.x == nullptr || in.expert_ids == nullptr ||
                                                in.routing_weights == nullptr || in.y == nullptr);
  fill_route_header(h, counts, inputs_missing ? nullptr : in.expert_ids,
                    inputs_missing ? 0 : in.tokens, c.tokens, c.topk, s.experts());
  if (h.error != kNoError) return h;
  if (inputs_missing) {
    h.error = kBadPointer;
    h.error_index[0] = in.x == nullptr                 ? 0
                       : in.expert_ids == nullptr      ? 1
                       : in.routing_weights == nullptr ? 3
                                                       : 4;
  } else if (in.expert_token_counts == nullptr) {
    h.error = kBadPointer;
    h.error_index[0] = 2;
  }
  return h;
}

MegaMoe::MegaMoe(const MegaMoeConfig& config, const MegaMoeWeights& weights)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.n_pes = shmem_n_pes();
  s.me = shmem_my_pe();
  validate(config, s.n_pes);
  s.cfg = config;
  if (s.cfg.workers.total() == 0) s.cfg.workers = {1, 2};
  if (s.cfg.schedule == MegaSchedule::kAuto) {
    s.cfg.schedule =
        workers_fit_cores(s.cfg.workers) ? MegaSchedule::kOverlapped : MegaSchedule::kInline;
  }
  const auto& c = s.cfg;
  s.shape = {c.model_dim, c.ffn_dim, c.format};
  if (weights.w1.size() != static_cast<std::size_t>(c.experts_per_pe) ||
      weights.w2.size() != weights.w1.size()) {
    refuse(fmt::format("weights for {} and {} experts given, expected experts_per_pe={}",
                       weights.w1.size(), weights.w2.size(), c.experts_per_pe));
  }
  for (int e = 0; e < c.experts_per_pe; ++e) {
    if (weights.w1[e] == nullptr || weights.w2[e] == nullptr)
      refuse(fmt::format("weights of local expert {} are null", e));
  }

  s.recv_cap = recv_capacity(c, s.n_pes);
  s.max_waves = max_waves(c, s.recv_cap);
  const Window wl = window_layout(c, s.n_pes);
  s.window = static_cast<std::byte*>(shmem_calloc(1, wl.total));
  if (s.window == nullptr) {
    refuse(fmt::format(
        "the symmetric window needs {} bytes per PE ({} received rows of {} bytes, {} combine "
        "rows of {} bytes), more than is free in the symmetric heap: raise SHMEM_SYMMETRIC_SIZE "
        "or lower tokens, model_dim or max_received_tokens (MAX_RECEIVED_TOKENS)",
        wl.total, s.recv_cap, s.shape.token_row().bytes(),
        static_cast<std::size_t>(c.tokens) * c.topk, c.model_dim * 2));
  }
  s.headers = HeaderExchange(s.window + wl.headers, s.n_pes, c.experts_per_pe);
  s.combine_done = FlagArray(s.window + wl.combine_done, s.n_pes);
  s.wave_arrivals = reinterpret_cast<std::uint64_t*>(s.window + wl.arrivals);
  s.recv_rows = s.window + wl.recv_rows;
  s.recv_meta = reinterpret_cast<RowMeta*>(s.window + wl.recv_meta);
  s.combine_rows = s.window + wl.combine_rows;
  s.arrivals_seen.assign(s.max_waves, 0);

  s.pool = std::make_unique<kernel::WorkerPool>(c.workers.total());
  // Packed by the matrix workers, which run the GEMMs: oneDNN work stays on their threads.
  s.weights.resize(c.experts_per_pe);
  s.pool->launch(c.workers, [&](kernel::KernelContext& w) {
    if (w.kind() != kernel::WorkerKind::kMatrix) return;
    for (int e = w.kind_id(); e < c.experts_per_pe; e += w.kind_count())
      s.weights[e] = pack_expert(s.gemm, s.shape, weights.w1[e], weights.w2[e]);
  });
  s.my_rows.resize(static_cast<std::size_t>(c.tokens) * s.shape.token_row().bytes());
  for (int m = 0; m < c.workers.matrix; ++m) {
    auto t = std::make_unique<TileSlots>();
    for (int p = 0; p < 2; ++p) {
      t->h[p].resize(static_cast<std::size_t>(c.wave_rows) * c.ffn_dim);
      t->act[p].resize(static_cast<std::size_t>(c.wave_rows) * s.shape.act_row().bytes());
      t->out[p].resize(static_cast<std::size_t>(c.wave_rows) * c.model_dim);
    }
    s.slots.push_back(std::move(t));
  }
}

MegaMoe::~MegaMoe() {
  state_->dispatch_ctx.reset();
  state_->combine_ctx.reset();
  state_->pool.reset();
  shmem_free(state_->window);
}

const MegaMoeConfig& MegaMoe::config() const {
  return state_->cfg;
}
std::string MegaMoe::gemm_engine() const {
  return state_->gemm.describe();
}
double MegaMoe::last_kernel_us() const {
  return state_->kernel_us;
}
void MegaMoe::set_tracing(bool on) {
  state_->trace.set_enabled(on);
}
std::vector<kernel::StageEvent> MegaMoe::last_trace() const {
  return state_->trace.events();
}

std::size_t MegaMoe::symmetric_bytes(const MegaMoeConfig& config, int n_pes, bool unfused) {
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
    bytes += MoeContext::window_bytes(d, n_pes) + MoeContext::window_bytes(cb, n_pes);
  }
  return bytes;
}

}  // namespace shmoe::moe
