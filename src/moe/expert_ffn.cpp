#include "moe/expert_ffn.hpp"

#include <cblas.h>

#include <cmath>

#include "numeric/half.hpp"

namespace shmoe::moe {
namespace {

void dequantize_rows(const std::byte* rows, std::size_t stride, int n, MxRow layout,
                     numeric::Fp8Format f, float* out) {
  for (int r = 0; r < n; ++r) {
    const auto* row = reinterpret_cast<const std::uint8_t*>(rows + r * stride);
    numeric::dequantize_mx(row, row + layout.scales_offset(), layout.elems, f,
                           out + static_cast<std::size_t>(r) * layout.elems);
  }
}

}  // namespace

ExpertWeights dequantize_expert(const ExpertFfnShape& s, const std::uint8_t* w1_rows,
                                const std::uint8_t* w2_rows) {
  ExpertWeights w;
  const MxRow r1 = s.token_row(), r2 = s.act_row();
  w.w1.resize(static_cast<std::size_t>(s.ffn_dim) * s.model_dim);
  w.w2.resize(static_cast<std::size_t>(s.model_dim) * r2.elems);
  dequantize_rows(reinterpret_cast<const std::byte*>(w1_rows), r1.bytes(), s.ffn_dim, r1, s.format,
                  w.w1.data());
  dequantize_rows(reinterpret_cast<const std::byte*>(w2_rows), r2.bytes(), s.model_dim, r2,
                  s.format, w.w2.data());
  return w;
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

void gemm1_tile(const ExpertFfnShape& s, const ExpertWeights& w, const std::byte* rows,
                std::size_t stride, int n, float* h, FfnScratch& scratch) {
  if (n == 0) return;
  const int D = s.model_dim, F = s.ffn_dim;
  scratch.a.resize(static_cast<std::size_t>(n) * D);
  dequantize_rows(rows, stride, n, s.token_row(), s.format, scratch.a.data());
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, F, D, 1.0f, scratch.a.data(), D,
              w.w1.data(), D, 0.0f, h, F);
}

void swiglu_quantize(const ExpertFfnShape& s, const float* h, int first, int last, std::byte* act) {
  const MxRow layout = s.act_row();
  const int half = layout.elems;
  std::vector<float> a(half);
  for (int r = first; r < last; ++r) {
    const float* gate = h + static_cast<std::size_t>(r) * s.ffn_dim;
    const float* up = gate + half;
    for (int j = 0; j < half; ++j) a[j] = gate[j] / (1.0f + std::exp(-gate[j])) * up[j];
    auto* row = reinterpret_cast<std::uint8_t*>(act + r * layout.bytes());
    numeric::quantize_mx(a.data(), half, s.format, row, row + layout.scales_offset());
  }
}

void gemm2_tile(const ExpertFfnShape& s, const ExpertWeights& w, const std::byte* act, int n,
                std::uint16_t* out, FfnScratch& scratch) {
  if (n == 0) return;
  const int D = s.model_dim, K = s.ffn_dim / 2;
  const std::size_t a_elems = static_cast<std::size_t>(n) * K;
  scratch.a.resize(a_elems + static_cast<std::size_t>(n) * D);
  float* a = scratch.a.data();
  float* o = a + a_elems;
  dequantize_rows(act, s.act_row().bytes(), n, s.act_row(), s.format, a);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, D, K, 1.0f, a, K, w.w2.data(), K, 0.0f, o,
              D);
  for (std::size_t i = 0; i < static_cast<std::size_t>(n) * D; ++i)
    out[i] = numeric::float_to_bf16(o[i]).bits;
}

void use_single_threaded_blas() {
  openblas_set_num_threads(1);
}

}  // namespace shmoe::moe
