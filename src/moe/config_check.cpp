#include "moe/config_check.hpp"

#include <fmt/format.h>

namespace shmoe::moe {
namespace {

std::string out_of_range(const char* name, long long value, long long lo, long long hi) {
  if (value >= lo && value <= hi) return "";
  return fmt::format("{}={} is out of range ({}..{})", name, value, lo, hi);
}

// Every operator's experts: at least one per PE, and a token's top-k among them.
std::string experts_error(const char* experts_name, int experts_per_pe, int most,
                          const char* topk_name, int topk, int n_pes) {
  if (experts_per_pe < 1 || experts_per_pe > most)
    return out_of_range(experts_name, experts_per_pe, 1, most);
  const int experts = n_pes * experts_per_pe;
  if (topk < 1 || topk > experts) {
    return fmt::format("{}={} is out of range (1..{}, the expert count {} PEs x {} experts)",
                       topk_name, topk, experts, n_pes, experts_per_pe);
  }
  return "";
}

}  // namespace

std::string config_error(const MoeConfig& c, int n_pes, const MoeConfigNames& n) {
  std::string e = experts_error(n.experts_per_pe, c.experts_per_pe, 4096, n.topk, c.topk, n_pes);
  if (e.empty()) e = out_of_range(n.max_bs, c.max_bs, 0, 1 << 24);
  if (e.empty()) e = out_of_range(n.hidden, c.hidden, 1, 1 << 20);
  if (e.empty() && (c.workers.matrix < 0 || c.workers.vector < 0 || c.workers.total() > 256)) {
    e = fmt::format("{} matrix={} vector={} are out of range (0..256 in all)", n.workers,
                    c.workers.matrix, c.workers.vector);
  }
  if (e.empty()) e = out_of_range(n.token_side_bytes, c.token_side_bytes, 0, 1 << 16);
  if (e.empty()) e = out_of_range(n.header_ints, c.header_ints, 0, 1 << 16);
  // Its upper bound, the PE's hang timeout, is checked where the PE makes the context
  // (shrink_bound_error in context.cpp).
  if (e.empty() && c.shrink_timeout_ms < 0) {
    e = out_of_range(n.shrink_timeout_ms, c.shrink_timeout_ms, 0, (1LL << 31) - 1) + " (0 for off)";
  }
  if (e.empty() && c.shrink_timeout_ms > 0 && c.max_recv_rows != 0) {
    e = fmt::format(
        "{}={} must be 0 in shrink mode ({} > 0), whose window holds a fixed slot per (local "
        "expert, source PE, token)",
        n.max_recv_rows, c.max_recv_rows, n.shrink_timeout_ms);
  }
  if (e.empty()) e = out_of_range(n.recv_blocks, c.recv_blocks, 0, kMaxRecvBlocks);
  if (e.empty() && c.shrink_timeout_ms > 0 && c.recv_blocks != 0) {
    e = fmt::format("{}={} must be 0 in shrink mode ({} > 0), whose rows stay in fixed slots",
                    n.recv_blocks, c.recv_blocks, n.shrink_timeout_ms);
  }
  const long long least = static_cast<long long>(c.max_bs) * n_pes;
  if (e.empty() && c.recv_block_expert_rows != 0) {
    e = out_of_range("recv_block_expert_rows", c.recv_block_expert_rows, least, 1LL << 30);
    if (!e.empty()) e += fmt::format(" (0 for packed; at least {} x {} PEs)", n.max_bs, n_pes);
  }
  return e;
}

std::string config_error(const MegaMoEConfig& c, int n_pes, const MegaConfigNames& n) {
  std::string e = out_of_range(n.tokens, c.tokens, 0, 1 << 20);
  if (e.empty()) e = out_of_range(n.model_dim, c.model_dim, 1, 1 << 16);
  if (e.empty() && (c.ffn_dim < 2 || c.ffn_dim > (1 << 17) || c.ffn_dim % 2 != 0)) {
    e = fmt::format("{}={} must be even and in 2..{} (SwiGLU splits it in two halves)", n.ffn_dim,
                    c.ffn_dim, 1 << 17);
  }
  if (e.empty()) e = experts_error(n.experts_per_pe, c.experts_per_pe, 1024, n.topk, c.topk, n_pes);
  const auto& w = c.workers;
  if (e.empty() && w.total() != 0 && (w.matrix < 1 || w.vector != 2 * w.matrix || w.matrix > 64)) {
    e = fmt::format("{}={} and {}={}: give both or neither, with {} = 2 x {} and {} in 1..64",
                    n.matrix_workers, w.matrix, n.vector_workers, w.vector, n.vector_workers,
                    n.matrix_workers, n.matrix_workers);
  }
  if (e.empty()) e = out_of_range(n.wave_rows, c.wave_rows, 0, 4096);
  if (e.empty() && static_cast<int>(c.schedule) > static_cast<int>(MegaSchedule::kSolo)) {
    e = fmt::format("{}={} is not a MegaSchedule (0 auto, 1 overlapped, 2 inline, 3 solo)",
                    n.schedule, static_cast<int>(c.schedule));
  }
  return e;
}

}  // namespace shmoe::moe
