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

// One expert's weights, loaded once in the form the operator keeps them (see mega_gemm.hpp).
struct ExpertWeights {
  GemmEngine::Weight w1;  // F outputs along D
  GemmEngine::Weight w2;  // D outputs along F/2
  std::size_t bytes() const { return w1.bytes() + w2.bytes(); }
};

// Loads MX FP8 weights given as rows along the reduction dimension: w1 [F] rows of D elements,
// w2 [D] rows of F/2 elements, each in MxRow layout. Runs on the calling thread.
ExpertWeights load_expert(const GemmEngine& g, const ExpertFfnShape& s, const std::uint8_t* w1_rows,
                          const std::uint8_t* w2_rows, WeightForm form);

// Row-wise MX quantization of BF16 tokens into token_row() rows, `stride` bytes apart.
void quantize_tokens(const ExpertFfnShape& s, const std::uint16_t* x_bf16, std::size_t rows,
                     std::byte* out, std::size_t stride);

// Per-thread scratch: the expanded tile a GEMM reads, a GEMM's fp32 output (a whole tile, or one
// block of it where an epilogue takes each block), SwiGLU's fp32 row.
struct FfnScratch {
  std::vector<std::byte> a;
  std::vector<float> out, act;
};

// h[n][F] = rows . w1^T; rows are token_row() rows `stride` bytes apart.
void gemm1_tile(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                const std::byte* rows, std::size_t stride, int n, float* h, FfnScratch& scratch);
// Rows [first, last) of h -> act_row() rows of act (contiguous, act_row().bytes() apart).
void swiglu_quantize(const ExpertFfnShape& s, const float* h, int first, int last, std::byte* act);
// Where a GEMM's epilogue records its blocks (stage "swiglu" or "write-back", one event per block,
// nested in the caller's GEMM stage); no trace, no events.
struct EpilogueTrace {
  kernel::StageTrace* trace = nullptr;
  int worker = 0, index = -1;
  kernel::StageTrace::Scope scope(std::string_view stage) const {
    return {trace != nullptr && trace->enabled() ? trace : nullptr, worker, stage, index};
  }
};

// GEMM1 with SwiGLU and re-quantization as its epilogue: act rows [0, n) straight from each block
// of GEMM1's output while it is in cache, no h in memory. The same bits as gemm1_tile followed by
// swiglu_quantize (the same kernel calls on the same blocks, the same function on each row).
void gemm1_swiglu(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                  const std::byte* rows, std::size_t stride, int n, std::byte* act,
                  FfnScratch& scratch, const EpilogueTrace& trace = {});

// Where GEMM2's epilogue puts each output row: `at(r)` is the model_dim BF16 elements that row r
// is rounded into, straight from the GEMM's block; `written(r)` follows once they are there.
struct OutRows {
  std::function<std::uint16_t*(int r)> at;
  std::function<void(int r)> written;  // may be empty
  bool streamed = false;               // rows read later by another core: stored past the cache
};
// out[n][D] (BF16) = act . w2^T, each row rounded from fp32 into out.at(r).
void gemm2_rows(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                const std::byte* act, int n, const OutRows& out, FfnScratch& scratch,
                const EpilogueTrace& trace = {});
// out[n][D] (BF16) = act . w2^T, contiguous: gemm2_rows into one array.
void gemm2_tile(const ExpertFfnShape& s, const GemmEngine& g, const ExpertWeights& w,
                const std::byte* act, int n, std::uint16_t* out, FfnScratch& scratch);

}  // namespace shmoe::moe
