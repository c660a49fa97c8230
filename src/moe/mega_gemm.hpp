// The MegaMoE GEMMs: out[m][n] (fp32) = a[m][k] . w[n][k]^T, where w is one expert weight matrix
// given as MX FP8 rows, and a is a tile of MX FP8 rows expanded for the call. A weight is held in
// one of two forms (WeightForm):
//   kFp8: as given, one byte per element and one E8M0 scale per 32 (1.03 bytes per parameter).
//     Tiles of up to kDirectRows rows go to numeric/mx_matrix, which reads the codes directly:
//     small batches are bound by reading the weights, and these are half the bytes of bf16.
//     Taller tiles expand the whole weight to the input type (about the work of reading it in
//     bf16) and run oneDNN on it: for tiles that tall the FP8 form costs more than kPacked.
//   kPacked: expanded and packed once into oneDNN's layout (2 or 4 bytes per parameter).
//
// Precision. An MX FP8 value (an E4M3 or E5M2 code times a power-of-two E8M0 scale) has at most 4
// significant bits, so it is exactly a bfloat16, and the product of two of them is exact in fp32:
// a bf16 GEMM with fp32 accumulation computes the same products as an fp32 GEMM on the
// dequantized values, 2x faster where the CPU has bf16 dot products (AVX512-BF16, AMX). Where it
// has none (AVX2, AVX-512 without BF16) oneDNN 2.6 only emulates bf16, slower than its fp32
// kernels, so the inputs are expanded to fp32 instead. The choice follows the CPU (and
// DNNL_MAX_CPU_ISA); results differ between the two only in the order of the fp32 sums.
//
// Threads. Every call runs on the calling thread alone: the operator's workers are the
// parallelism. The same tile on the same engine gives the same bits whichever thread runs it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "numeric/fp8.hpp"

namespace shmoe::moe {

enum class GemmInput : std::uint8_t { kBf16, kF32 };
enum class WeightForm : std::uint8_t { kFp8, kPacked };

class GemmEngine {
 public:
  // A weight matrix in the kernel's layout (n output features, reduction length k).
  class Weight {
   public:
    int n() const;
    int k() const;
    WeightForm form() const;
    std::size_t bytes() const;  // what one pass over it reads

   private:
    friend class GemmEngine;
    struct Impl;
    std::shared_ptr<const Impl> impl_;
  };

  GemmEngine();  // picks the input type from the CPU
  ~GemmEngine();
  GemmEngine(const GemmEngine&) = delete;
  GemmEngine& operator=(const GemmEngine&) = delete;

  // Tiles of at most this many rows read kFp8 weights directly (see above). Past it, expanding the
  // whole weight and running oneDNN's bf16 kernel costs less: for a 2816 x 2048 weight (AMD EPYC
  // with AVX512-BF16, one thread) 0.88 ms against 0.99 ms at 16 rows, 3.0 against 5.5 at 128.
  static constexpr int kDirectRows = 8;

  // The type of the rows `multiply` takes for m rows against w (expand_rows writes it).
  GemmInput input() const;
  GemmInput input(const Weight& w, int m) const;
  static std::size_t bytes_of(GemmInput t) { return t == GemmInput::kBf16 ? 2 : 4; }
  // "oneDNN 2.6.3, bf16 inputs (avx512_core_bf16)": for reports.
  std::string describe() const;
  // The name of the implementation oneDNN picks for an m x n x k product ("brg:avx512_core_bf16").
  std::string kernel_name(int m, int n, int k) const;

  // Rows `stride` bytes apart, each `k` MX FP8 codes followed by their scales (MxRow), to `m`
  // contiguous rows of k elements of type t: exact (see above).
  static void expand_rows(const std::byte* rows, std::size_t stride, int m, int k,
                          numeric::Fp8Format f, GemmInput t, void* out);
  // Loads n such rows (the weight's output features, each along the reduction dimension) in the
  // given form.
  Weight load(const std::byte* rows, std::size_t stride, int n, int k, numeric::Fp8Format f,
              WeightForm form) const;

  // How the product is cut into oneDNN calls: chunks of rows of a, and each chunk's columns in
  // panels, every weight's panel at the same columns one after the other. A panel of a weight
  // (about kPanelBytes: 128 columns at k 2048 in bf16, all of them at k 512) stays in cache while
  // the whole chunk passes it, where 32-row blocks over all columns read every weight again per
  // block: at DeepSeek-V2-Lite's expert shape 0.95x oneDNN's untiled matmul against 1.0-1.2x
  // (docs/performance/2026-12-07-mega-panels.md). A chunk has the rows that keep a panel's output
  // at kPanelFloats per weight (256 KiB: 512 rows at 128 columns), still in L2 when the epilogue
  // reads it. Chunks of up to kWholeRows rows (and direct FP8 tiles) take all columns in one call
  // per weight: reading the weight is their cost, and a call per panel would add oneDNN's fixed
  // cost per call.
  static constexpr std::size_t kPanelBytes = std::size_t{512} << 10;
  static constexpr int kPanelFloats = 64 << 10;
  static constexpr int kMinPanelCols = 128;
  static constexpr int kChunkRows = kPanelFloats / kMinPanelCols;  // the most a chunk has
  static constexpr int kWholeRows = 32;
  static_assert(kDirectRows <= kWholeRows, "a direct FP8 tile is one panel");
  struct Cut {
    int rows = 0, cols = 0;  // a chunk's rows, a panel's columns (the weight's n: one panel)
  };
  // The cut for weights of n x k elements of `elem` bytes, where their layout allows it.
  static Cut cut(int n, int k, std::size_t elem);
  // All n columns in one panel, and the rows that keep it at about kPanelFloats.
  static Cut one_panel(int n);
  static constexpr int kMaxWeights = 2;  // GEMM1's gate and up

  // Rows [r0, r1) x columns [c0, c1) of each weight's product: out[i] holds weight i's, row by
  // row, (c1 - c0) floats each. A chunk's panels come in column order, so c1 == n ends rows
  // [r0, r1). Valid until the epilogue returns.
  struct Panel {
    int r0 = 0, r1 = 0, c0 = 0, c1 = 0;
    std::array<const float*, kMaxWeights> out{};
  };
  using Epilogue = std::function<void(const Panel&)>;

  // The products a . w^T of each weight in ws (1 to kMaxWeights, the same n, k and form), a being
  // m contiguous rows of k elements of type input(*ws[0], m), handed to `epilogue` panel by panel.
  // oneDNN's kernel for a new (rows, columns) pair is made on first use.
  void multiply(std::span<const Weight* const> ws, const void* a, int m,
                const Epilogue& epilogue) const;
  // out[m][w.n()] = a . w^T: the same calls (so the same bits), each panel copied into place.
  void multiply(const Weight& w, const void* a, int m, float* out) const;

 private:
  // Rows [r0, r1) through oneDNN in panels of panel_cols (ws in the packed form, or expanded at
  // `plain`).
  void run_chunk(std::span<const Weight* const> ws, const std::byte* const* plain, const void* a,
                 int r0, int r1, int panel_cols, const Epilogue& epilogue) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shmoe::moe
