#include <fmt/format.h>
#include <shmem.h>

#include <numeric>

#include "moe/context_state.hpp"

namespace shmoe::moe {
namespace {

constexpr std::size_t round64(std::size_t v) {
  return (v + 63) / 64 * 64;
}

void validate(const MoeConfig& c, int n_pes) {
  auto bad = [](const std::string& m) { throw MoeError("MoeContext: " + m); };
  if (c.experts_per_pe < 1 || c.experts_per_pe > 4096) {
    bad(fmt::format("experts_per_pe={} is out of range (1..4096)", c.experts_per_pe));
  }
  if (c.max_bs < 0 || c.max_bs > (1 << 24))
    bad(fmt::format("max_bs={} is out of range (0..{})", c.max_bs, 1 << 24));
  if (c.hidden < 1 || c.hidden > (1 << 20))
    bad(fmt::format("hidden={} is out of range (1..{})", c.hidden, 1 << 20));
  const int experts = n_pes * c.experts_per_pe;
  if (c.topk < 1 || c.topk > experts) {
    bad(fmt::format("topk={} is out of range (1..{}, the expert count {} PEs x {} experts)", c.topk,
                    experts, n_pes, c.experts_per_pe));
  }
  if (c.workers.matrix < 0 || c.workers.vector < 0 || c.workers.total() > 256) {
    bad(fmt::format("workers matrix={} vector={} are out of range (0..256 in all)",
                    c.workers.matrix, c.workers.vector));
  }
}

}  // namespace

std::vector<bool> segments_for_copy_engine(const std::vector<std::size_t>& segment_bytes,
                                           std::size_t threshold) {
  std::size_t total = 0, nonempty = 0;
  for (auto b : segment_bytes) {
    total += b;
    nonempty += b > 0;
  }
  const double average = nonempty ? static_cast<double>(total) / nonempty : 0;
  std::vector<bool> engine(segment_bytes.size());
  for (std::size_t i = 0; i < segment_bytes.size(); ++i) {
    engine[i] = segment_bytes[i] >= threshold && static_cast<double>(segment_bytes[i]) > average;
  }
  return engine;
}

MoeContext::MoeContext(const MoeConfig& config) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.n_pes = shmem_n_pes();
  s.me = shmem_my_pe();
  validate(config, s.n_pes);
  s.cfg = config;
  if (s.cfg.workers.total() == 0) s.cfg.workers = kernel::default_worker_counts(s.n_pes);
  if (s.cfg.workers.vector == 0) s.cfg.workers.vector = 1;
  const auto& c = s.cfg;
  s.row_bytes = static_cast<std::size_t>(c.hidden) * dtype_size(c.dtype);
  s.recv_cap =
      c.max_recv_rows ? c.max_recv_rows : static_cast<std::size_t>(s.n_pes) * c.max_bs * c.topk;
  s.header_stride =
      round64(sizeof(CallHeader) +
              sizeof(std::int32_t) * static_cast<std::size_t>(s.n_pes) * c.experts_per_pe);

  // Window: flags, two parities of headers, received rows and their side-band, combine rows.
  const std::size_t flags = FlagArray::bytes(s.n_pes);
  std::size_t off = 0;
  auto take = [&](std::size_t bytes) {
    std::size_t at = off;
    off += round64(bytes);
    return at;
  };
  const std::size_t f_header0 = take(flags), f_header1 = take(flags), f_dispatch = take(flags),
                    f_ready = take(flags), f_combine = take(flags);
  const std::size_t h0 = take(s.header_stride * s.n_pes), h1 = take(s.header_stride * s.n_pes);
  const std::size_t rows = take(s.recv_cap * s.row_bytes);
  const std::size_t meta = take(s.recv_cap * sizeof(RowMeta));
  const std::size_t comb = take(static_cast<std::size_t>(c.max_bs) * c.topk * s.row_bytes);
  s.window = static_cast<std::byte*>(shmem_calloc(1, off));
  if (s.window == nullptr) {
    throw MoeError(fmt::format(
        "MoeContext: the symmetric windows need {} bytes per PE (recv rows {} x {} bytes, combine "
        "rows {} x {} bytes), more than is free in the symmetric heap: raise SHMEM_SYMMETRIC_SIZE "
        "or lower max_recv_rows/max_bs",
        off, s.recv_cap, s.row_bytes, static_cast<std::size_t>(c.max_bs) * c.topk, s.row_bytes));
  }
  s.header_flags[0] = FlagArray(s.window + f_header0, s.n_pes);
  s.header_flags[1] = FlagArray(s.window + f_header1, s.n_pes);
  s.dispatch_done = FlagArray(s.window + f_dispatch, s.n_pes);
  s.combine_ready = FlagArray(s.window + f_ready, s.n_pes);
  s.combine_done = FlagArray(s.window + f_combine, s.n_pes);
  s.headers[0] = s.window + h0;
  s.headers[1] = s.window + h1;
  s.recv_rows = s.window + rows;
  s.recv_meta = reinterpret_cast<RowMeta*>(s.window + meta);
  s.combine_rows = s.window + comb;
  s.pool = std::make_unique<kernel::WorkerPool>(c.workers.total());
  s.engine = std::make_unique<kernel::CopyEngine>();
}

MoeContext::~MoeContext() {
  state_->engine.reset();
  state_->pool.reset();
  shmem_free(state_->window);
}

const MoeConfig& MoeContext::config() const {
  return state_->cfg;
}
int MoeContext::n_pes() const {
  return state_->n_pes;
}
int MoeContext::my_pe() const {
  return state_->me;
}
std::size_t MoeContext::recv_capacity() const {
  return state_->recv_cap;
}
const OpTiming& MoeContext::last_timing() const {
  return state_->timing;
}

}  // namespace shmoe::moe
