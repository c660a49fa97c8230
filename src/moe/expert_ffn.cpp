#include "moe/expert_ffn.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

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
  const auto* w1 = reinterpret_cast<const std::byte*>(w1_rows);
  const int half = s.ffn_dim / 2;
  return {g.load(w1, r1.bytes(), half, r1.elems, s.format, form),
          g.load(w1 + half * r1.bytes(), r1.bytes(), half, r1.elems, s.format, form),
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
  const auto F = static_cast<std::size_t>(s.ffn_dim), half = F / 2;
  const GemmEngine::Weight* halves[] = {&w.gate, &w.up};
  g.multiply(halves, expand_tile(s, g, w.gate, rows, stride, n, scratch), n,
             [&](const GemmEngine::Panel& p) {
               const auto cols = static_cast<std::size_t>(p.c1 - p.c0);
               for (int r = p.r0; r < p.r1; ++r) {
                 const std::size_t from = (r - p.r0) * cols;
                 float* row = h + r * F + p.c0;
                 std::copy_n(p.out[0] + from, cols, row);
                 std::copy_n(p.out[1] + from, cols, row + half);
               }
             });
}

namespace {

// The elements the vector kernel quantizes at once (16 MX blocks): rows of a narrower panel go
// through it together. Blocks are scaled each on its own, so the bits are the same.
constexpr int kQuantizeGroup = 16 * static_cast<int>(numeric::kMxBlockSize);

// n rows of `cols` values in x (contiguous) quantized into act rows from `row` on, at column c0.
void store_codes(const ExpertFfnShape& s, const float* x, int n, int c0, std::size_t cols,
                 std::byte* row, std::size_t stride) {
  const MxRow layout = s.act_row();
  const std::size_t blocks = cols / numeric::kMxBlockSize;
  const std::size_t scale0 = layout.scales_offset() + c0 / numeric::kMxBlockSize;
  auto* first = reinterpret_cast<std::uint8_t*>(row);
  if (n == 1) return numeric::quantize_mx(x, cols, s.format, first + c0, first + scale0);
  std::uint8_t codes[kQuantizeGroup], scales[kQuantizeGroup / numeric::kMxBlockSize];
  numeric::quantize_mx(x, n * cols, s.format, codes, scales);
  for (int i = 0; i < n; ++i, first += stride) {
    std::memcpy(first + c0, codes + i * cols, cols);
    std::memcpy(first + scale0, scales + i * blocks, blocks);
  }
}

// The same rows' values through MX FP8, as GEMM2's input of type t (through `rounded` when n > 1).
void store_values(const ExpertFfnShape& s, const float* x, int n, int c0, std::size_t cols,
                  GemmInput t, float* rounded, std::byte* row, std::size_t stride) {
  const std::size_t elem = GemmEngine::bytes_of(t), bytes = cols * elem;
  void* out = n == 1 ? static_cast<void*>(row + c0 * elem) : rounded;
  if (t == GemmInput::kBf16) {
    numeric::round_trip_mx_bf16(x, n * cols, s.format, static_cast<std::uint16_t*>(out));
  } else {
    numeric::round_trip_mx(x, n * cols, s.format, static_cast<float*>(out));
  }
  if (n == 1) return;
  for (int i = 0; i < n; ++i, row += stride)
    std::memcpy(row + c0 * elem, reinterpret_cast<const std::byte*>(rounded) + i * bytes, bytes);
}

// Where swiglu_quantize_cols puts its rows, `stride` bytes apart: MX FP8 act rows (codes, then
// scales), or the values those expand to in GEMM2's input type `expanded`.
struct ActRows {
  std::byte* base = nullptr;
  std::size_t stride = 0;
  std::optional<GemmInput> expanded;
};

// Columns [c0, c0 + cols) of `rows` rows of SwiGLU's output, from GEMM1's gate and up values
// there (`cols` apart), into `to` (c0 a multiple of 32): SwiGLU into `tmp` (max(cols,
// kQuantizeGroup) floats), then MX FP8, through `rounded` (as many floats) for expanded rows. The
// only place either rounding happens, fused or not. A 128-column panel's rows go four at a time:
// one at a time, its 4 blocks cost the quantizer nearly what 16 do (the stage took 1.4x as long
// at DeepSeek-V2-Lite's shape).
void swiglu_quantize_cols(const ExpertFfnShape& s, const float* gate, const float* up, int rows,
                          int c0, int cols, float* tmp, float* rounded, const ActRows& to) {
  const auto ucols = static_cast<std::size_t>(cols);
  // Rows together only where each ends at a block's end (a partial block is scaled on its own).
  const int together = ucols % numeric::kMxBlockSize == 0 ? std::max(1, kQuantizeGroup / cols) : 1;
  for (int r = 0; r < rows; r += together) {
    const int n = std::min(together, rows - r);
    for (int i = 0; i < n; ++i) {
      const std::size_t from = static_cast<std::size_t>(r + i) * ucols;
      numeric::swiglu(gate + from, up + from, ucols, tmp + i * ucols);
    }
    std::byte* row = to.base + static_cast<std::size_t>(r) * to.stride;
    if (to.expanded) {
      store_values(s, tmp, n, c0, ucols, *to.expanded, rounded, row, to.stride);
    } else {
      store_codes(s, tmp, n, c0, ucols, row, to.stride);
    }
  }
}

static_assert(GemmEngine::kMinPanelCols % numeric::kMxBlockSize == 0,
              "GEMM1's panels (multiples of 64 columns) start at MX block boundaries");

}  // namespace

void swiglu_quantize(const ExpertFfnShape& s, const float* h, int first, int last, std::byte* act) {
  const MxRow layout = s.act_row();
  std::vector<float> tmp(std::max(layout.elems, kQuantizeGroup));
  for (int r = first; r < last; ++r) {
    const float* row = h + static_cast<std::size_t>(r) * s.ffn_dim;
    swiglu_quantize_cols(s, row, row + layout.elems, 1, 0, layout.elems, tmp.data(), nullptr,
                         {act + r * layout.bytes(), layout.bytes(), std::nullopt});
  }
}

void gemm1_swiglu(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                  const std::byte* rows, std::size_t stride, int n, void* in, FfnScratch& scratch,
                  const EpilogueTrace& trace) {
  if (n == 0) return;
  const GemmInput t = g.input(w.w2, n);
  const ActRows to{static_cast<std::byte*>(in), s.act_row().elems * GemmEngine::bytes_of(t), t};
  const auto floats = static_cast<std::size_t>(std::max(s.act_row().elems, kQuantizeGroup));
  scratch.act.resize(floats);
  scratch.rounded.resize(floats);
  const GemmEngine::Weight* halves[] = {&w.gate, &w.up};
  g.multiply(halves, expand_tile(s, g, w.gate, rows, stride, n, scratch), n,
             [&](const GemmEngine::Panel& p) {
               auto scope = trace.scope("swiglu");
               swiglu_quantize_cols(s, p.out[0], p.out[1], p.r1 - p.r0, p.c0, p.c1 - p.c0,
                                    scratch.act.data(), scratch.rounded.data(),
                                    {to.base + p.r0 * to.stride, to.stride, t});
             });
}

void gemm2_rows(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                const void* in, int n, const OutRows& out, FfnScratch& scratch,
                const EpilogueTrace& trace) {
  if (n == 0) return;
  const GemmEngine::Weight* w2[] = {&w.w2};
  g.multiply(w2, in, n, [&](const GemmEngine::Panel& p) {
    auto scope = trace.scope("write-back");
    const auto cols = static_cast<std::size_t>(p.c1 - p.c0);
    if (p.c0 == 0) {  // each row's place, once per chunk
      scratch.out_rows.resize(static_cast<std::size_t>(p.r1 - p.r0));
      for (int r = p.r0; r < p.r1; ++r) scratch.out_rows[r - p.r0] = out.at(r);
    }
    // Past the cache only whole rows: a panel's pieces of rows 4 KiB apart (256 bytes at
    // model_dim 2048) went through the cache in about half the time (0.5-0.8 against 1.0-1.2 ms a
    // call per PE, DeepSeek-V2-Lite's shape at decode).
    const bool whole_rows = p.c0 == 0 && p.c1 == s.model_dim;
    for (int r = p.r0; r < p.r1; ++r) {
      const float* from = p.out[0] + (r - p.r0) * cols;
      const OutRow& row = scratch.out_rows[r - p.r0];
      std::uint16_t* to = row.to + p.c0;
      if (whole_rows && row.streamed) {
        numeric::floats_to_bf16_streamed(from, cols, to);
      } else {
        numeric::floats_to_bf16(from, cols, to);
      }
    }
    if (p.c1 == s.model_dim && out.written) {
      for (int r = p.r0; r < p.r1; ++r) out.written(r);
    }
  });
}

void gemm2_tile(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                const std::byte* act, int n, std::uint16_t* out, FfnScratch& scratch) {
  if (n == 0) return;
  const auto D = static_cast<std::size_t>(s.model_dim);
  gemm2_rows(s, g, w, expand_tile(s, g, w.w2, act, s.act_row().bytes(), n, scratch), n,
             {[&](int r) { return OutRow{out + r * D}; }, {}}, scratch);
}

}  // namespace shmoe::moe
