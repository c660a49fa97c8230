#include "mega_workload.hpp"

#include <algorithm>
#include <cmath>

#include "numeric/half.hpp"
#include "random_stream.hpp"

namespace shmoe::tools {
namespace {

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
void fill_rows(Stream& r, int rows, int cols, const moe::MxRow& layout, numeric::Fp8Format f,
               std::vector<std::uint8_t>& codes, std::vector<float>& dequantized) {
  const double sigma = std::sqrt(1.0 / cols);
  codes.assign(static_cast<std::size_t>(rows) * layout.bytes(), 0);
  dequantized.resize(static_cast<std::size_t>(rows) * cols);
  std::vector<float> row(cols);
  Normals normal(r);
  for (int i = 0; i < rows; ++i) {
    for (auto& v : row) v = static_cast<float>(normal.next() * sigma);
    std::uint8_t* out = codes.data() + static_cast<std::size_t>(i) * layout.bytes();
    numeric::quantize_mx(row.data(), cols, f, out, out + layout.scales_offset());
    numeric::dequantize_mx(out, out + layout.scales_offset(), cols, f,
                           dequantized.data() + static_cast<std::size_t>(i) * cols);
  }
}

}  // namespace

GeneratedExpert make_expert(const moe::ExpertFfnShape& shape, std::uint64_t seed, int expert) {
  GeneratedExpert g;
  Stream r(seed, expert, 10);
  fill_rows(r, shape.ffn_dim, shape.model_dim, shape.token_row(), shape.format, g.w1_rows, g.w1);
  fill_rows(r, shape.model_dim, shape.ffn_dim / 2, shape.act_row(), shape.format, g.w2_rows, g.w2);
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
    x[i] = numeric::float_to_bf16(static_cast<float>(normal.next())).bits;
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
                               const std::vector<const GeneratedExpert*>& experts,
                               bool replay_fp8) {
  const int D = o.model_dim, F = o.ffn_dim, half = F / 2;
  const moe::ExpertFfnShape shape{D, F, o.mode};
  const moe::MxRow token_row = shape.token_row(), act_row = shape.act_row();
  ReferenceLayer ref;
  ref.y.assign(static_cast<std::size_t>(mine.bs) * D, 0.0);
  ref.slack.assign(ref.y.size(), 0.0);
  std::vector<double> x(D), h(F), a(half), a_up(half), a_down(half);
  std::vector<float> tmp(std::max(D, half));
  std::vector<std::uint8_t> q(std::max(token_row.bytes(), act_row.bytes()));
  // What the operator's FP8 rounding does to a row of n values (numeric/mx on their fp32 value).
  auto round_fp8 = [&](const std::vector<double>& in, std::vector<double>& out, double factor,
                       const moe::MxRow& row) {
    for (int j = 0; j < row.elems; ++j) tmp[j] = static_cast<float>(in[j] * factor);
    numeric::quantize_mx(tmp.data(), row.elems, o.mode, q.data(), q.data() + row.scales_offset());
    numeric::dequantize_mx(q.data(), q.data() + row.scales_offset(), row.elems, o.mode, tmp.data());
    for (int j = 0; j < row.elems; ++j) out[j] = tmp[j];
  };
  // The operator computes the activations in fp32 from an fp32 GEMM, so they differ from these
  // fp64 ones in about the sixth digit: one that lies that close to an FP8 rounding boundary (or a
  // block maximum that close to a power of two, which moves the block's scale) may round either
  // way there. Rounding the whole row moved by +-2^-12 finds them; the slack is what either
  // choice can change in the output.
  constexpr double kAmbiguity = 0x1p-12;
  for (int t = 0; t < mine.bs; ++t) {
    const auto* bits =
        reinterpret_cast<const std::uint16_t*>(mine.x.data()) + static_cast<std::size_t>(t) * D;
    for (int j = 0; j < D; ++j) x[j] = numeric::bf16_to_float({bits[j]});
    if (replay_fp8) round_fp8(x, x, 1.0, token_row);  // the same BF16 values: no ambiguity
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
        round_fp8(a, a_up, 1.0 + kAmbiguity, act_row);
        round_fp8(a, a_down, 1.0 - kAmbiguity, act_row);
        round_fp8(a, a, 1.0, act_row);
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
