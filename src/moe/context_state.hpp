// The inside of a MoeContext: symmetric window, flags, generation counters, workers, and the
// per-call plan shared by the operators.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernel/copy_engine.hpp"
#include "kernel/worker_pool.hpp"
#include "moe/moe.hpp"
#include "moe/protocol.hpp"

namespace shmoe::moe {

// One dispatched row's side-band: where it came from and its routing weight.
struct RowMeta {
  std::int32_t src_pe;
  std::int32_t token;
  std::int32_t slot;
  float scale;
};

struct MoeContext::State {
  MoeConfig cfg;
  int n_pes = 0;
  int me = 0;
  std::size_t row_bytes = 0;
  std::size_t recv_cap = 0;
  std::size_t header_stride = 0;  // bytes of one CallHeader plus its counts, cache-line rounded

  // The symmetric window (one shmem_malloc) and its parts, as addresses on this PE.
  std::byte* window = nullptr;
  std::byte* headers[2] = {};         // [parity][src] header rows
  std::byte* recv_rows = nullptr;     // [recv_cap][row_bytes]
  RowMeta* recv_meta = nullptr;       // [recv_cap]
  std::byte* combine_rows = nullptr;  // [max_bs * topk][row_bytes]
  FlagArray header_flags[2];
  FlagArray dispatch_done;
  FlagArray combine_ready;
  FlagArray combine_done;

  std::uint64_t dispatch_generation = 0;
  std::uint64_t combine_generation = 0;

  std::unique_ptr<kernel::WorkerPool> pool;
  std::unique_ptr<kernel::CopyEngine> engine;
  OpTiming timing;

  // Filled by the first worker, read by all after a worker barrier.
  std::vector<std::int64_t> positions;  // per (token, slot): row index at the destination, or -1
  std::vector<std::int32_t> counts;     // [src][dst][expert], from every PE's header
  std::string error;

  CallHeader* header(int parity, int src) const {
    return reinterpret_cast<CallHeader*>(headers[parity] +
                                         static_cast<std::size_t>(src) * header_stride);
  }
  std::int32_t* header_counts(int parity, int src) const {
    return reinterpret_cast<std::int32_t*>(header(parity, src) + 1);
  }
  std::int32_t count(int src, int dst, int expert) const {
    return counts[(static_cast<std::size_t>(src) * n_pes + dst) * cfg.experts_per_pe + expert];
  }
  int experts() const { return n_pes * cfg.experts_per_pe; }
};

// Which segments of a call go through the copy engine: those of at least the threshold and
// above the average segment size (so the engine takes the few big ones, the workers the rest).
std::vector<bool> segments_for_copy_engine(const std::vector<std::size_t>& segment_bytes,
                                           std::size_t threshold);

}  // namespace shmoe::moe
