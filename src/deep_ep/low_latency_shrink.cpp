// LowLatencyBuffer's shrink mode: its start (the live ranks' barrier and the hinted shapes'
// operators, made while every rank is here), the mask and clean_low_latency_buffer's barrier.
#include <fmt/format.h>
#include <shmem.h>

#include <cstdlib>
#include <string>

#include "deep_ep/checks.hpp"
#include "deep_ep/low_latency_buffer.hpp"
#include "moe/moe.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::deep_ep {
namespace {

constexpr int kMaxTopk = 11;  // DeepEP's low-latency dispatch takes at most 11 experts per token

}  // namespace

int shrink_area_topk(int experts, int topk) {
  return std::max(topk, std::min(experts, kMaxTopk));
}

int shrink_timeout_ms(const char* text) {
  if (text == nullptr) return 10000;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 1 || v >= (1LL << 31)) {
    throw moe::Refused(fmt::format(
        "deep_ep.Buffer: SHMOE_SHRINK_TIMEOUT_MS='{}' must be an int of milliseconds in 1..{}, "
        "below SHMOE_HANG_TIMEOUT",
        text, (1LL << 31) - 1));
  }
  return static_cast<int>(v);
}

void LowLatencyBuffer::start_shrink(const shmoe_low_latency_buffer_config_t& config) {
  const int ms = config.shrink_timeout_ms;
  if (ms < 0) {
    throw moe::Refused(
        fmt::format("LowLatencyBuffer: shrink_timeout_ms={} must be at least 0 "
                    "(0: no shrink mode)",
                    ms));
  }
  shrink_ms_ = ms;
  mask_.assign(static_cast<std::size_t>(n_), 0);
  MoeConfig c;
  c.num_experts_per_pe = 1;
  c.max_tokens_per_pe = 1;
  c.hidden = 1;
  c.num_topk = 1;
  c.dtype = SHMOE_DTYPE_INT32;
  c.shrink_timeout_ms = ms;
  const std::string why = MoeBuffer::config_error(c, n_);
  if (!why.empty())
    throw moe::Refused("deep_ep.Buffer: SHMOE_SHRINK_TIMEOUT_MS=" + std::to_string(ms) + ": " +
                       why);
  sync_ = std::make_unique<MoeBuffer>(c);
  // The hinted shapes a low-latency call can take, which every rank must have asked about alike.
  std::vector<LowLatencyShape> shapes;
  std::uint64_t sum = 1469598103934665603ull;  // FNV-1a over the shapes' numbers
  for (int i = 0; i < config.num_hinted_shapes; ++i) {
    const std::int32_t* h = config.hinted_shapes + 4 * static_cast<std::ptrdiff_t>(i);
    const int m = h[0], hidden = h[1], ranks = h[2], e = h[3];
    if (ranks != n_ || m < 1 || hidden < 1 || hidden % kFp8Block != 0 || e < 1 || e % n_ != 0) {
      continue;
    }
    shapes.push_back({m, hidden, e, shrink_area_topk(e, 1)});
    for (const int v : {m, hidden, e})
      sum = (sum ^ static_cast<std::uint32_t>(v)) * 1099511628211ull;
  }
  agree(SHMEM_TEAM_WORLD, "deep_ep.Buffer", "",
        {{"low-latency shapes asked of get_low_latency_rdma_size_hint",
          static_cast<std::int64_t>(shapes.size())},
         {"their checksum", static_cast<std::int64_t>(sum >> 1)}});
  for (const LowLatencyShape& s : shapes) areas(s, "deep_ep.Buffer");
}

bool LowLatencyBuffer::any_masked() const {
  for (const std::int32_t m : mask_) {
    if (m != 0) return true;
  }
  return false;
}

void LowLatencyBuffer::update_mask(int rank, bool mask) {
  constexpr const char* call = "deep_ep.Buffer.low_latency_update_mask_buffer";
  if (rank < 0 || rank >= n_) {
    throw moe::Refused(
        fmt::format("{}: rank_to_mask={} is out of range (0..{})", call, rank, n_ - 1));
  }
  if (mask && rank == me_) {  // the operators refuse a mask that holds the calling rank itself
    throw moe::Refused(
        fmt::format("{}: rank_to_mask={} is this rank, which cannot mask itself", call, rank));
  }
  auto& m = mask_[static_cast<std::size_t>(rank)];
  if (!mask && m != 0) unmasked_.insert(rank);
  if (mask) unmasked_.erase(rank);
  m = mask ? 1 : 0;
}

void LowLatencyBuffer::query_mask(const shmoe_tensor_t& mask_status) const {
  Checks checks("deep_ep.Buffer.low_latency_query_mask_buffer");
  checks.tensor(mask_status, "mask_status", {SHMOE_DTYPE_INT32}, {{n_}});
  if (checks.any()) throw moe::Refused(checks.why());
  std::copy(mask_.begin(), mask_.end(), static_cast<std::int32_t*>(mask_status.data));
}

void LowLatencyBuffer::clean_mask() {
  for (int j = 0; j < n_; ++j) {
    if (mask_[static_cast<std::size_t>(j)] != 0) unmasked_.insert(j);
  }
  cleared_ = true;
  std::fill(mask_.begin(), mask_.end(), 0);
}

// clean_low_latency_buffer's step: a rejoin of every rank that brings the operators to the same
// counters when a rank unmasked by hand is still unmasked, or the mask was cleared and nothing is
// masked since (a rank that comes back); else a barrier of the live ranks.
void LowLatencyBuffer::barrier() {
  bool rejoin = cleared_ && !any_masked();
  for (const int r : unmasked_) rejoin = rejoin || mask_[static_cast<std::size_t>(r)] == 0;
  if (rejoin) {
    std::vector<shmoe_moe_buffer_t> others;
    for (auto& [shape, a] : areas_) others.push_back(a->bf16->handle());
    sync_->rejoin(mask_.data(), others);
  } else {
    sync_->sync_live(mask_.data());
  }
  unmasked_.clear();
  cleared_ = false;
}

}  // namespace shmoe::deep_ep
