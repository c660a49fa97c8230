// The expert's feed-forward network on MX FP8 rows, step by step: quantize tokens, GEMM1
// (model_dim -> ffn_dim), SwiGLU and re-quantize, GEMM2 (ffn_dim/2 -> model_dim). Every rounding
// of the MegaMoE layer happens here, and both the fused operator and the unfused chain call these
// functions on the same row tiles, which is what makes their outputs bitwise identical.
//
// SwiGLU convention: GEMM1's output row h has ffn_dim elements; the first half is the gate, the
// second the up projection: act[j] = silu(h[j]) * h[ffn_dim/2 + j], silu(z) = z / (1 + e^-z).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernel/stage_trace.hpp"
#include "moe/mega_gemm.hpp"
#include "numeric/fp8.hpp"
#include "numeric/mx.hpp"

namespace shmoe::moe {

// A row of n elements in MX FP8: n codes, then one E8M0 scale per 32 elements, padded so that
// rows stay 16-byte aligned (and can travel as int32 elements).
struct MxRow {
  int elems = 0;
  std::size_t scales_offset() const { return static_cast<std::size_t>(elems); }
  std::size_t bytes() const {
    return (static_cast<std::size_t>(elems) + numeric::mx_num_blocks(elems) + 15) / 16 * 16;
  }
};

struct ExpertFfnShape {
  int model_dim = 0;  // D
  int ffn_dim = 0;    // F, even
  numeric::Fp8Format format = numeric::Fp8Format::kE4M3;
  MxRow token_row() const { return {model_dim}; }
  MxRow act_row() const { return {ffn_dim / 2}; }
};

// One expert's weights, loaded once in the form the operator keeps them (see mega_gemm.hpp). W1's
// halves are two weights, so that GEMM1 runs the gate and up columns SwiGLU pairs panel by panel.
struct ExpertWeights {
  GemmEngine::Weight gate, up;  // W1's first and second F/2 outputs along D
  GemmEngine::Weight w2;        // D outputs along F/2
  std::size_t bytes() const { return gate.bytes() + up.bytes() + w2.bytes(); }
};

// Loads MX FP8 weights given as rows along the reduction dimension: w1 [F] rows of D elements,
// w2 [D] rows of F/2 elements, each in MxRow layout. Runs on the calling thread.
ExpertWeights load_expert(const GemmEngine& g, const ExpertFfnShape& s, const std::uint8_t* w1_rows,
                          const std::uint8_t* w2_rows, WeightForm form);

// Row-wise MX quantization of BF16 tokens into token_row() rows, `stride` bytes apart.
void quantize_tokens(const ExpertFfnShape& s, const std::uint16_t* x_bf16, std::size_t rows,
                     std::byte* out, std::size_t stride);

// Where GEMM2's epilogue puts one output row: the model_dim BF16 elements it is rounded into,
// straight from the GEMM's panels, and whether another core reads it later (its whole row is
// then stored past the cache).
struct OutRow {
  std::uint16_t* to = nullptr;
  bool streamed = false;
};

// Per-thread scratch: the expanded tile a GEMM reads, SwiGLU's fp32 output for one panel's rows
// and their rounded values, where GEMM2's epilogue puts the rows of a chunk.
struct FfnScratch {
  std::vector<std::byte> a;
  std::vector<float> act, rounded;
  std::vector<OutRow> out_rows;
};

// h[n][F] = rows . w1^T; rows are token_row() rows `stride` bytes apart.
void gemm1_tile(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                const std::byte* rows, std::size_t stride, int n, float* h, FfnScratch& scratch);
// Rows [first, last) of h -> act_row() rows of act (contiguous, act_row().bytes() apart).
void swiglu_quantize(const ExpertFfnShape& s, const float* h, int first, int last, std::byte* act);
// Where a GEMM's epilogue records its panels (stage "swiglu" or "write-back", one event per panel,
// nested in the caller's GEMM stage); no trace, no events.
struct EpilogueTrace {
  kernel::StageTrace* trace = nullptr;
  int worker = 0, index = -1;
  kernel::StageTrace::Scope scope(std::string_view stage) const {
    return {trace != nullptr && trace->enabled() ? trace : nullptr, worker, stage, index};
  }
};

// GEMM1 with SwiGLU and re-quantization as its epilogue, rows [0, n) straight in the form GEMM2
// reads: `in`, n rows of act_row().elems elements of type g.input(w.w2, n), the values act rows'
// codes and scales expand to (GemmEngine::expand_rows). From each panel of GEMM1's gate and up
// columns while it is in cache: no h, no codes, no expansion pass (numeric::round_trip_mx). The
// same bits as gemm1_tile, swiglu_quantize and gemm2_tile's expansion (the same kernel calls on
// the same panels; SwiGLU is per element and MX quantization per 32 elements, and panels start at
// multiples of 32).
void gemm1_swiglu(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                  const std::byte* rows, std::size_t stride, int n, void* in, FfnScratch& scratch,
                  const EpilogueTrace& trace = {});

// Where GEMM2's epilogue puts each output row: `at(r)` is row r's place; `written(r)` follows once
// all of its elements are there. Both come once per row, in order, chunk by chunk
// (GemmEngine::Cut: at most kChunkRows rows, the first at a multiple of its size): `at` for every
// row of a chunk, then its panels, then `written` for every row of it.
struct OutRows {
  std::function<OutRow(int r)> at;
  std::function<void(int r)> written;  // may be empty
};
// out[n][D] (BF16) = in . w2^T, `in` GEMM2's input as gemm1_swiglu writes it, each row rounded
// from fp32 into out.at(r).
void gemm2_rows(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                const void* in, int n, const OutRows& out, FfnScratch& scratch,
                const EpilogueTrace& trace = {});
// out[n][D] (BF16) = act . w2^T, contiguous: act rows expanded, then gemm2_rows into one array.
void gemm2_tile(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                const std::byte* act, int n, std::uint16_t* out, FfnScratch& scratch);

}  // namespace shmoe::moe
