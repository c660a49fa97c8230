// Inputs generated from a seed and golden outputs computed independently of the operators: every
// PE can regenerate every other PE's inputs, so each checks its own outputs without any
// communication, exactly (dispatch) or against an fp64 reference (combine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "options.hpp"

namespace shmoe::tools {

struct PeInputs {
  int bs = 0;
  std::vector<std::byte> x;              // [bs, hidden] of dtype
  std::vector<std::int32_t> expert_ids;  // [bs, topk]
  std::vector<float> scales;             // [bs, topk]
};

PeInputs make_inputs(const MoeRunOptions& o, const MoeCase& c, std::uint64_t seed, int pe,
                     int n_pes);

// The stand-in for an expert's FFN: y = x * (0.5 + 0.25 * (e % 7)), in fp32, stored as dtype.
void expert_step(DType dtype, int expert, const void* in_row, void* out_row, int hidden);

struct DispatchGolden {
  int rows = 0;
  std::vector<std::byte> expand_x;
  std::vector<std::int32_t> assist_info;
  std::vector<std::int32_t> ep_recv_count;
  std::vector<std::int32_t> expert_token_nums;
  std::vector<float> expand_scales;
};

// What PE `me` must receive, from the inputs of all PEs.
DispatchGolden golden_dispatch(const std::vector<PeInputs>& all, const MoeCase& c, int me);

// x_out of PE `me` in fp64: sum over k of expert_step(x[t])[j] * scale[t][k], and the sum of the
// absolute values of the terms (for the tolerance).
void golden_combine(const PeInputs& mine, const MoeCase& c, std::vector<double>& value,
                    std::vector<double>& magnitude);

// The tolerance for a combine output element: rounding of the output type, plus fp32
// accumulation over topk terms, relative to the terms' magnitude.
double combine_tolerance(DType dtype, int topk, double magnitude);

}  // namespace shmoe::tools
