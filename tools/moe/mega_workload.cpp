#include "mega_workload.hpp"

#include <algorithm>
#include <cmath>

#include "dtype.hpp"
#include "random_stream.hpp"

namespace shmoe::tools {
namespace {

// One row of n fp32 values into an MX FP8 row at `out` (the public helper: the operator's input
// format), and, with `back`, its values again.
void quantize_row(const float* row, int n, shmoe_fp8_format_t f, std::uint8_t* out, float* back) {
  if (shmoe_mx_quantize_rows(row, 1, n, f, out) != SHMOE_MOE_OK ||
      (back != nullptr && shmoe_mx_dequantize_rows(out, 1, n, f, back) != SHMOE_MOE_OK)) {
    throw Error(shmoe_moe_last_error());
  }
}

// Normal values by Box-Muller, both of each pair (a logarithm and a cosine for every value were
// half of a run's time at DeepSeek-V2-Lite's shape). Tokens and weights are normal,
// as in trained models, rather than uniform: with uniform data about one element in eight of every
// 32-element block lies in the top eighth of the block's range, where MX E4M3 saturates (448 is
// not a power of two), and the layer's error is then dominated by saturation rather than rounding.
class Normals {
 public:
  explicit Normals(Stream& r) : r_(r) {}
  double next() {
    if (spare_ready_) {
      spare_ready_ = false;
      return spare_;
    }
    const double u1 = 1.0 - r_.uniform(), u2 = r_.uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1)), angle = 6.283185307179586 * u2;
    spare_ = radius * std::sin(angle);
    spare_ready_ = true;
    return radius * std::cos(angle);
  }

 private:
  Stream& r_;
  double spare_ = 0;
  bool spare_ready_ = false;
};

// Weights ~ N(0, 1/fan_in), so activations keep their scale from layer input to output.
void fill_rows(Stream& r, int rows, int cols, shmoe_fp8_format_t f,
               std::vector<std::uint8_t>& codes, std::vector<float>& dequantized) {
  const double sigma = std::sqrt(1.0 / cols);
  const std::size_t row_bytes = mx_row_bytes(cols);
  codes.assign(static_cast<std::size_t>(rows) * row_bytes, 0);
  dequantized.resize(static_cast<std::size_t>(rows) * cols);
  std::vector<float> row(cols);
  Normals normal(r);
  for (int i = 0; i < rows; ++i) {
    for (auto& v : row) v = static_cast<float>(normal.next() * sigma);
    quantize_row(row.data(), cols, f, codes.data() + static_cast<std::size_t>(i) * row_bytes,
                 dequantized.data() + static_cast<std::size_t>(i) * cols);
  }
}

}  // namespace

GeneratedExpert make_expert(const MegaOptions& o, std::uint64_t seed, int expert) {
  GeneratedExpert g;
  Stream r(seed, expert, 10);
  fill_rows(r, o.ffn_dim, o.model_dim, o.mode, g.w1_rows, g.w1);
  fill_rows(r, o.model_dim, o.ffn_dim / 2, o.mode, g.w2_rows, g.w2);
  return g;
}

MoeCase mega_case(const MegaOptions& o) {
  return {o.tokens, o.model_dim, o.topk, o.experts_per_pe, SHMOE_DTYPE_BFLOAT16};
}

PeInputs make_mega_inputs(const MegaOptions& o, std::uint64_t seed, int pe, int n_pes) {
  PeInputs in = make_inputs(o.routing, mega_case(o), seed, pe, n_pes);
  Stream r(seed, pe, 11);
  Normals normal(r);
  auto* x = reinterpret_cast<std::uint16_t*>(in.x.data());
  for (std::size_t i = 0; i < in.x.size() / 2; ++i)
    x[i] = float_to_bf16(static_cast<float>(normal.next()));
  return in;
}

std::vector<std::int32_t> expected_expert_counts(const std::vector<PeInputs>& all,
                                                 const MegaOptions& o, int me) {
  std::vector<std::int32_t> counts(o.experts_per_pe, 0);
  for (const auto& in : all) {
    for (std::int32_t e : in.expert_ids) {
      if (e >= 0 && e / o.experts_per_pe == me) ++counts[e % o.experts_per_pe];
    }
  }
  return counts;
}

ReferenceLayer reference_layer(const PeInputs& mine, const MegaOptions& o,
                               const std::vector<const GeneratedExpert*>& experts, bool replay_fp8,
                               int tokens) {
  const int D = o.model_dim, F = o.ffn_dim, half = F / 2;
  tokens = std::min(tokens, mine.bs);

  ReferenceLayer ref;
  ref.y.assign(static_cast<std::size_t>(tokens) * D, 0.0);
  ref.slack.assign(ref.y.size(), 0.0);
  std::vector<double> x(D), h(F), a(half), a_up(half), a_down(half);
  std::vector<float> tmp(std::max(D, half));
  std::vector<std::uint8_t> q(std::max(mx_row_bytes(D), mx_row_bytes(half)));
  // What the operator's FP8 rounding does to a row of n values (the public MX helpers on their
  // fp32 value).
  auto round_fp8 = [&](const std::vector<double>& in, std::vector<double>& out, double factor,
                       int n) {
    for (int j = 0; j < n; ++j) tmp[j] = static_cast<float>(in[j] * factor);
    quantize_row(tmp.data(), n, o.mode, q.data(), tmp.data());
    for (int j = 0; j < n; ++j) out[j] = tmp[j];
  };
  // The operator computes the activations in fp32 from an fp32 GEMM, so they differ from these
  // fp64 ones in about the sixth digit: one that lies that close to an FP8 rounding boundary (or a
  // block maximum that close to a power of two, which moves the block's scale) may round either
  // way there. Rounding the whole row moved by +-2^-12 finds them; the slack is what either
  // choice can change in the output.
  constexpr double kAmbiguity = 0x1p-12;
  for (int t = 0; t < tokens; ++t) {
    const auto* bits =
        reinterpret_cast<const std::uint16_t*>(mine.x.data()) + static_cast<std::size_t>(t) * D;
    for (int j = 0; j < D; ++j) x[j] = bf16_to_float(bits[j]);
    if (replay_fp8) round_fp8(x, x, 1.0, D);  // the same BF16 values: no ambiguity
    for (int k = 0; k < o.topk; ++k) {
      const std::size_t i = static_cast<std::size_t>(t) * o.topk + k;
      const int e = mine.expert_ids[i];
      if (e < 0) continue;
      const GeneratedExpert& w = *experts[e];
      for (int f = 0; f < F; ++f) {
        const float* row = w.w1.data() + static_cast<std::size_t>(f) * D;
        double s = 0;
        for (int j = 0; j < D; ++j) s += static_cast<double>(row[j]) * x[j];
        h[f] = s;
      }
      for (int j = 0; j < half; ++j) a[j] = h[j] / (1.0 + std::exp(-h[j])) * h[half + j];
      std::vector<std::pair<int, double>> ambiguous;  // (element, how far its rounding can move)
      if (replay_fp8) {
        round_fp8(a, a_up, 1.0 + kAmbiguity, half);
        round_fp8(a, a_down, 1.0 - kAmbiguity, half);
        round_fp8(a, a, 1.0, half);
        for (int j = 0; j < half; ++j) {
          // a_up/a_down are rounded from the moved values: compare at the same scale.
          const double up = a_up[j] / (1.0 + kAmbiguity), down = a_down[j] / (1.0 - kAmbiguity);
          const double moved = std::max(std::fabs(up - a[j]), std::fabs(down - a[j]));
          if (moved > 2 * kAmbiguity * std::fabs(a[j])) ambiguous.emplace_back(j, moved);
        }
      }
      const double weight = mine.scales[i];
      for (int d = 0; d < D; ++d) {
        const float* row = w.w2.data() + static_cast<std::size_t>(d) * half;
        double s = 0;
        for (int j = 0; j < half; ++j) s += static_cast<double>(row[j]) * a[j];
        const std::size_t out = static_cast<std::size_t>(t) * D + d;
        ref.y[out] += weight * s;
        for (const auto& [j, moved] : ambiguous)
          ref.slack[out] += std::fabs(weight * row[j]) * moved;
      }
    }
  }
  return ref;
}

}  // namespace shmoe::tools
