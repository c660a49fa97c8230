// Routing shared by the operators that send tokens to experts (dispatch, MegaMoE): the counts a
// PE announces in its call header, and the plan every PE derives from everyone's counts.
//
// Rows land at the destination grouped by local expert, then by source PE, then in token order,
// so each row's place follows from the counts alone and no PE needs to ask where to write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "moe/protocol.hpp"

namespace shmoe::moe {

// Checks this PE's routing input and counts its rows per (destination PE, local expert) into
// `counts` [n_experts]; a problem goes into h.error / h.error_index for every PE to report.
void fill_route_header(CallHeader& h, std::int32_t* counts, const std::int32_t* expert_ids, int bs,
                       int max_bs, int topk, int n_experts);

struct RoutePlan {
  int n_pes = 0, experts_per_pe = 0;
  std::vector<std::int32_t> counts;     // [src][dst][expert], from every PE's header
  std::vector<std::int64_t> positions;  // per (token, slot) of mine: row at its destination, or -1

  std::int32_t count(int src, int dst, int expert) const {
    return counts[(static_cast<std::size_t>(src) * n_pes + dst) * experts_per_pe + expert];
  }
  // Rows PE `dst` receives for its local expert `expert`, and in all.
  std::int64_t expert_rows(int dst, int expert) const;
  std::int64_t rows_to(int dst) const;
};

// Builds the plan of call g from the exchanged headers. Returns an error (the same text on every
// PE) if some destination would receive more than `recv_cap` rows; `cap_name` names the setting
// that raises the capacity.
std::string plan_routes(const HeaderExchange& hx, std::uint64_t g, int me, int n_pes,
                        int experts_per_pe, const std::int32_t* expert_ids, int bs, int topk,
                        std::size_t recv_cap, const char* op, const char* cap_name,
                        RoutePlan& plan);

// Shrink mode's receive layout: the first row of local expert `expert` from source PE `src`, of
// `slots` (max_bs) rows each; row j of that run follows at + j.
inline std::int64_t fixed_slot(int n_pes, int slots, int expert, int src) {
  return (static_cast<std::int64_t>(expert) * n_pes + src) * slots;
}

// Shrink mode's plan: masked PEs send and receive nothing, and rows land in fixed slots, rows of
// local expert e from source s at (e * n_pes + s) * slots, so that a row's place depends on its
// sender alone and PEs whose masks differ never misplace rows. Refuses a (source, expert) pair
// of more than `slots` rows (a token that names an expert twice).
std::string plan_fixed_slots(const HeaderExchange& hx, std::uint64_t g, int me, int n_pes,
                             int experts_per_pe, const std::int32_t* expert_ids, int bs, int topk,
                             int slots, const LiveSet& live, const char* op, RoutePlan& plan);

}  // namespace shmoe::moe
