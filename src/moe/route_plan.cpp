#include "moe/route_plan.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace shmoe::moe {

void fill_route_header(CallHeader& h, std::int32_t* counts, const std::int32_t* expert_ids, int bs,
                       int max_bs, int topk, int n_experts) {
  std::fill(counts, counts + n_experts, 0);
  if (bs < 0 || bs > max_bs) {
    h.error = InputError::kBsOutOfRange;
    h.error_index[0] = bs;
    h.error_index[1] = max_bs;
    return;
  }
  for (int t = 0; t < bs; ++t) {
    for (int k = 0; k < topk; ++k) {
      const std::int32_t e = expert_ids[static_cast<std::size_t>(t) * topk + k];
      if (e == -1) continue;
      if (e < -1 || e >= n_experts) {
        h.error = InputError::kExpertOutOfRange;
        h.error_index[0] = t;
        h.error_index[1] = k;
        h.error_index[2] = e;
        return;
      }
      ++counts[e];  // e = dst * L + local expert
    }
  }
}

std::int64_t RoutePlan::expert_rows(int dst, int expert) const {
  std::int64_t n = 0;
  for (int src = 0; src < n_pes; ++src) n += count(src, dst, expert);
  return n;
}

std::int64_t RoutePlan::rows_to(int dst) const {
  std::int64_t n = 0;
  for (int e = 0; e < experts_per_pe; ++e) n += expert_rows(dst, e);
  return n;
}

namespace {

// Every source's counts, as its header gave them (zero for a masked source).
void gather_counts(const HeaderExchange& hx, std::uint64_t g, int n_pes, int experts_per_pe,
                   const LiveSet& live, RoutePlan& plan) {
  const int P = n_pes, L = experts_per_pe;
  plan.n_pes = P;
  plan.experts_per_pe = L;
  plan.counts.assign(static_cast<std::size_t>(P) * P * L, 0);
  for (int src = 0; src < P; ++src) {
    if (!live.live(src)) continue;
    std::copy_n(hx.counts(g, src), P * L,
                plan.counts.begin() + static_cast<std::size_t>(src) * P * L);
  }
}

// Each of my (token, slot) pairs' row at its destination: next[dst * L + expert] counts on.
void place_rows(std::vector<std::int64_t>& next, const std::int32_t* expert_ids, int bs, int topk,
                int L, const LiveSet& live, RoutePlan& plan) {
  plan.positions.assign(static_cast<std::size_t>(bs) * topk, -1);
  for (std::size_t i = 0; i < plan.positions.size(); ++i) {
    const std::int32_t e = expert_ids[i];
    if (e >= 0 && live.live(e / L)) plan.positions[i] = next[e]++;
  }
}

}  // namespace

std::string plan_fixed_slots(const HeaderExchange& hx, std::uint64_t g, int me, int n_pes,
                             int experts_per_pe, const std::int32_t* expert_ids, int bs, int topk,
                             int slots, const LiveSet& live, const char* op, RoutePlan& plan) {
  const int P = n_pes, L = experts_per_pe;
  gather_counts(hx, g, P, L, live, plan);
  for (int src = 0; src < P; ++src) {
    for (int dst = 0; dst < P; ++dst) {
      for (int e = 0; e < L; ++e) {
        if (plan.count(src, dst, e) > slots) {
          return fmt::format(
              "{}: PE {} sends {} rows to expert {}, but shrink mode holds max_tokens_per_pe={} "
              "per (expert, "
              "source PE): a token names that expert more than once",
              op, src, plan.count(src, dst, e), dst * L + e, slots);
        }
      }
    }
  }
  std::vector<std::int64_t> next(static_cast<std::size_t>(P) * L);
  for (int dst = 0; dst < P; ++dst) {
    for (int e = 0; e < L; ++e)
      next[static_cast<std::size_t>(dst) * L + e] = fixed_slot(P, slots, e, me);
  }
  place_rows(next, expert_ids, bs, topk, L, live, plan);
  return {};
}

std::string plan_routes(const HeaderExchange& hx, std::uint64_t g, int me, int n_pes,
                        int experts_per_pe, const std::int32_t* expert_ids, int bs, int topk,
                        std::size_t recv_cap, const char* op, const char* cap_name,
                        RoutePlan& plan) {
  const int P = n_pes, L = experts_per_pe;
  gather_counts(hx, g, P, L, LiveSet{}, plan);
  // Every destination's total, checked on every PE so that every PE refuses alike.
  for (int dst = 0; dst < P; ++dst) {
    const std::int64_t total = plan.rows_to(dst);
    if (static_cast<std::size_t>(total) > recv_cap) {
      return fmt::format(
          "{}: PE {} would receive {} rows, but its window holds {} ({}); raise {} (and "
          "SHMEM_SYMMETRIC_SIZE if needed)",
          op, dst, total, recv_cap, cap_name, cap_name);
    }
  }
  // Where my rows start in each (destination, expert) block: all rows of earlier experts there,
  // then the rows of lower-numbered sources for this expert.
  std::vector<std::int64_t> next(static_cast<std::size_t>(P) * L);
  for (int dst = 0; dst < P; ++dst) {
    std::int64_t base = 0;
    for (int e = 0; e < L; ++e) {
      std::int64_t before_me = 0;
      for (int src = 0; src < me; ++src) before_me += plan.count(src, dst, e);
      next[static_cast<std::size_t>(dst) * L + e] = base + before_me;
      base += plan.expert_rows(dst, e);
    }
  }
  place_rows(next, expert_ids, bs, topk, L, LiveSet{}, plan);
  return {};
}

}  // namespace shmoe::moe
