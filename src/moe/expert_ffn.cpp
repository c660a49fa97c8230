#include "moe/expert_ffn.hpp"

#include "numeric/half.hpp"
#include "numeric/swiglu.hpp"

namespace shmoe::moe {
namespace {

// Expands n MX rows into the scratch tile the GEMM with w reads.
const void* expand_tile(const ExpertFfnShape& s, const GemmEngine& g, const GemmEngine::Weight& w,
                        const std::byte* rows, std::size_t stride, int n, FfnScratch& scratch) {
  const GemmInput t = g.input(w, n);
  scratch.a.resize(static_cast<std::size_t>(n) * w.k() * GemmEngine::bytes_of(t));
  GemmEngine::expand_rows(rows, stride, n, w.k(), s.format, t, scratch.a.data());
  return scratch.a.data();
}

}  // namespace

ExpertWeights load_expert(const GemmEngine& g, const ExpertFfnShape& s, const std::uint8_t* w1_rows,
                          const std::uint8_t* w2_rows, WeightForm form) {
  const MxRow r1 = s.token_row(), r2 = s.act_row();
  return {g.load(reinterpret_cast<const std::byte*>(w1_rows), r1.bytes(), s.ffn_dim, r1.elems,
                 s.format, form),
          g.load(reinterpret_cast<const std::byte*>(w2_rows), r2.bytes(), s.model_dim, r2.elems,
                 s.format, form)};
}

void quantize_tokens(const ExpertFfnShape& s, const std::uint16_t* x_bf16, std::size_t rows,
                     std::byte* out, std::size_t stride) {
  const MxRow layout = s.token_row();
  for (std::size_t t = 0; t < rows; ++t) {
    auto* row = reinterpret_cast<std::uint8_t*>(out + t * stride);
    numeric::quantize_mx_bf16(x_bf16 + t * s.model_dim, s.model_dim, s.format, row,
                              row + layout.scales_offset());
  }
}

void gemm1_tile(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                const std::byte* rows, std::size_t stride, int n, float* h, FfnScratch& scratch) {
  if (n == 0) return;
  g.multiply(w.w1, expand_tile(s, g, w.w1, rows, stride, n, scratch), n, h);
}

void swiglu_quantize(const ExpertFfnShape& s, const float* h, int first, int last, std::byte* act) {
  const MxRow layout = s.act_row();
  const int half = layout.elems;
  std::vector<float> a(half);
  for (int r = first; r < last; ++r) {
    const float* gate = h + static_cast<std::size_t>(r) * s.ffn_dim;
    numeric::swiglu(gate, gate + half, half, a.data());
    auto* row = reinterpret_cast<std::uint8_t*>(act + r * layout.bytes());
    numeric::quantize_mx(a.data(), half, s.format, row, row + layout.scales_offset());
  }
}

void gemm2_tile(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                const std::byte* act, int n, std::uint16_t* out, FfnScratch& scratch) {
  if (n == 0) return;
  const MxRow layout = s.act_row();
  const std::size_t out_elems = static_cast<std::size_t>(n) * s.model_dim;
  scratch.out.resize(out_elems);
  g.multiply(w.w2, expand_tile(s, g, w.w2, act, layout.bytes(), n, scratch), n, scratch.out.data());
  numeric::floats_to_bf16(scratch.out.data(), out_elems, out);
}

}  // namespace shmoe::moe
