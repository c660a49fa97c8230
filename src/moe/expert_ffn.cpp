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

namespace {

// One row of GEMM1's output -> one act_row(): SwiGLU into `tmp` (act_row().elems floats), then MX
// FP8 codes and scales. The only place either rounding happens, fused or not.
void swiglu_quantize_row(const ExpertFfnShape& s, const float* h_row, float* tmp, std::byte* act) {
  const MxRow layout = s.act_row();
  numeric::swiglu(h_row, h_row + layout.elems, layout.elems, tmp);
  auto* row = reinterpret_cast<std::uint8_t*>(act);
  numeric::quantize_mx(tmp, layout.elems, s.format, row, row + layout.scales_offset());
}

}  // namespace

void swiglu_quantize(const ExpertFfnShape& s, const float* h, int first, int last, std::byte* act) {
  const MxRow layout = s.act_row();
  std::vector<float> tmp(layout.elems);
  for (int r = first; r < last; ++r) {
    swiglu_quantize_row(s, h + static_cast<std::size_t>(r) * s.ffn_dim, tmp.data(),
                        act + r * layout.bytes());
  }
}

void gemm1_swiglu(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                  const std::byte* rows, std::size_t stride, int n, std::byte* act,
                  FfnScratch& scratch, const EpilogueTrace& trace) {
  if (n == 0) return;
  const MxRow layout = s.act_row();
  scratch.out.resize(static_cast<std::size_t>(GemmEngine::kBlockRows) * s.ffn_dim);
  scratch.act.resize(layout.elems);
  g.multiply(w.w1, expand_tile(s, g, w.w1, rows, stride, n, scratch), n, scratch.out.data(),
             [&](int r0, int r1, const float* h) {
               auto scope = trace.scope("swiglu");
               for (int r = r0; r < r1; ++r) {
                 swiglu_quantize_row(s, h + static_cast<std::size_t>(r - r0) * s.ffn_dim,
                                     scratch.act.data(), act + r * layout.bytes());
               }
             });
}

void gemm2_rows(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                const std::byte* act, int n, const OutRows& out, FfnScratch& scratch,
                const EpilogueTrace& trace) {
  if (n == 0) return;
  const auto D = static_cast<std::size_t>(s.model_dim);
  scratch.out.resize(GemmEngine::kBlockRows * D);
  const void* a = expand_tile(s, g, w.w2, act, s.act_row().bytes(), n, scratch);
  g.multiply(w.w2, a, n, scratch.out.data(), [&](int r0, int r1, const float* rows) {
    auto scope = trace.scope("write-back");
    for (int r = r0; r < r1; ++r) {
      const float* row = rows + (r - r0) * D;
      if (out.streamed) {
        numeric::floats_to_bf16_streamed(row, D, out.at(r));
      } else {
        numeric::floats_to_bf16(row, D, out.at(r));
      }
      if (out.written) out.written(r);
    }
  });
}

void gemm2_tile(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                const std::byte* act, int n, std::uint16_t* out, FfnScratch& scratch) {
  const auto D = static_cast<std::size_t>(s.model_dim);
  gemm2_rows(s, g, w, act, n, {[&](int r) { return out + r * D; }, {}}, scratch);
}

}  // namespace shmoe::moe
