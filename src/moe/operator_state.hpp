// What both MoE operators (dispatch/combine's MoeBuffer and MegaMoE) keep alike: who this PE
// is, the symmetric window with the protocol pieces every call starts and ends with (the header
// exchange, the combine-done flags, received and combine rows), the worker pool, and the route
// plan of the current call. Each operator's State adds only its own parts.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kernel/worker_pool.hpp"
#include "moe/protocol.hpp"
#include "moe/route_plan.hpp"

namespace shmoe::moe {

struct OperatorState {
  int n_pes = 0;
  int me = 0;
  std::size_t recv_cap = 0;  // rows this PE's window can receive

  // The symmetric window (one shmem_calloc) and the parts every operator has in it.
  std::byte* window = nullptr;
  HeaderExchange headers;
  FlagArray combine_done;
  std::byte* recv_rows = nullptr;
  std::byte* combine_rows = nullptr;

  std::unique_ptr<kernel::WorkerPool> pool;

  // Per call, filled by one worker before a worker barrier.
  RoutePlan plan;
  std::string error;

  OperatorState();
  OperatorState(const OperatorState&) = delete;
  OperatorState& operator=(const OperatorState&) = delete;

  // Where the common parts lie in the window, as the operator's WindowLayout placed them.
  struct CommonParts {
    std::size_t headers, combine_done, recv_rows, combine_rows;
  };
  // Collective: the window of `bytes`, zeroed, with the common parts placed; false (and no
  // window) where the symmetric heap has no room, on every PE alike.
  bool open_window(std::size_t bytes, const CommonParts& at, int experts_per_pe,
                   int header_caller_ints = 0);
  // Collective: the workers stop, then the window goes back to the heap.
  void close();
};

}  // namespace shmoe::moe
