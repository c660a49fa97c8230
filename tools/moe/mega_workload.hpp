// MegaMoE inputs and golden data: tokens and routing as for dispatch/combine (workload.hpp), MX
// FP8 expert weights generated per global expert from the seed, and the fp64 reference layer.
#pragma once

#include <cstdint>
#include <vector>

#include "mega_options.hpp"
#include "workload.hpp"

namespace shmoe::tools {

// One expert's weights, quantized (what the operator gets) and dequantized (what the reference
// computes with).
struct GeneratedExpert {
  std::vector<std::uint8_t> w1_rows, w2_rows;  // MX rows (shmoe_mega_moe_create)
  std::vector<float> w1, w2;                   // dequantized: [F][D], [D][F/2]
};

GeneratedExpert make_expert(const MegaOptions& o, std::uint64_t seed, int expert);

MoeCase mega_case(const MegaOptions& o);  // the token/routing shape in workload.hpp's terms

// A PE's tokens (BF16, normal), routing and routing weights.
PeInputs make_mega_inputs(const MegaOptions& o, std::uint64_t seed, int pe, int n_pes);

// Rows each local expert of PE `me` receives, replayed from every PE's routing.
std::vector<std::int32_t> expected_expert_counts(const std::vector<PeInputs>& all,
                                                 const MegaOptions& o, int me);

// y of one PE in fp64 from the BF16 tokens and the dequantized weights. Without replay_fp8 the
// tokens and activations are not rounded at all (the layer's ideal); with it they are rounded to
// MX FP8 where the operator rounds them (the public MX helpers, shmoe_mx_quantize_rows; the
// library tests its quantizer against a brute-force oracle), and everything else stays fp64.
// `experts` holds every global expert; `tokens`: the first that many of this PE's (all if more).
struct ReferenceLayer {
  std::vector<double> y;
  // Per element: how far the output can move because an activation lies so close to an FP8
  // rounding boundary that fp32 and fp64 may round it differently (replay_fp8 only; mostly 0).
  std::vector<double> slack;
};
ReferenceLayer reference_layer(const PeInputs& mine, const MegaOptions& o,
                               const std::vector<const GeneratedExpert*>& experts, bool replay_fp8,
                               int tokens);

}  // namespace shmoe::tools
