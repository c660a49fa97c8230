// The combine's reduction, shared by combine and MegaMoE so that both give the same bits: each
// token's top-k rows summed in fp32, weighted, in increasing slot order, then rounded once to the
// element type. The fixed order makes the result independent of the PE count, the arrival order
// and the worker count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "moe/dtype.hpp"

namespace shmoe::moe {

struct WeightedRows {
  DType dtype = DType::kFloat32;
  int hidden = 0;
  int topk = 0;
  const std::byte* rows = nullptr;  // [tokens * topk][row_bytes], row (t, k) at t * topk + k
  std::size_t row_bytes = 0;
  const std::int32_t* expert_ids = nullptr;  // [tokens, topk]; slots with -1 are skipped
  const float* weights = nullptr;            // [tokens, topk]
  void* out = nullptr;                       // [tokens][hidden] of dtype (or float32)
  // Where not null, row (t, k) is read at row_at[t * topk + k] instead, wherever it lies.
  const std::byte* const* row_at = nullptr;
  // out holds the fp32 sums, not rounded to dtype (for a caller that adds to them first).
  bool out_float32 = false;
};

// out[t] = sum over k (increasing) of rows[t, k] * weights[t, k], for t in [first, last).
void reduce_weighted_rows(const WeightedRows& w, std::size_t first, std::size_t last);

// The instruction sets the reduction has a path for; every path gives the same bits, and
// reduce_weighted_rows takes the widest one the CPU has. Named so that tests can run each one.
enum class ReducePath : std::uint8_t { kBaseline, kAvx2, kAvx512 };
bool reduce_path_available(ReducePath path);
ReducePath best_reduce_path();
// reduce_weighted_rows on the given path (the baseline where the CPU lacks it).
void reduce_weighted_rows_on(ReducePath path, const WeightedRows& w, std::size_t first,
                             std::size_t last);

}  // namespace shmoe::moe
