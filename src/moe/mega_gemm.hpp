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

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
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

  // Rows of the product one kernel call makes: oneDNN runs blocks of this many rows (kFp8 tiles of
  // up to kDirectRows are one block). A block of GEMM1's output (128 KiB at ffn_dim 1024) is still
  // in L2 when its epilogue reads it, and the operator's GEMMs take as long as with one call per
  // 128-row wave, where 16-row blocks took 2-4% longer (bench/mega_gemm tiles, AMD EPYC with
  // AVX512-BF16; docs/performance/2026-12-06-mega-epilogues.md).
  static constexpr int kBlockRows = 32;
  static_assert(kDirectRows <= kBlockRows, "a direct FP8 tile is one block");

  // What a GEMM's caller does with each finished block of rows, while they are in cache: rows
  // [r0, r1) of the product, at `rows` (r1 - r0 rows of w.n() floats).
  using Epilogue = std::function<void(int r0, int r1, const float* rows)>;

  // out[m][w.n()] = a . w^T, a being m contiguous rows of w.k() elements of type input(w, m).
  // oneDNN's kernel for a new row count is made on first use: one for kBlockRows rows and one
  // per remainder.
  void multiply(const Weight& w, const void* a, int m, float* out) const;
  // The same product with an epilogue: every block is written at `block` (room for kBlockRows rows
  // of w.n() floats) and handed to `epilogue` before the next one overwrites it. The same kernels
  // on the same blocks as the form above, so the same bits.
  void multiply(const Weight& w, const void* a, int m, float* block,
                const Epilogue& epilogue) const;

 private:
  // Both multiply forms: block b goes to out_of(r0) and then to epilogue (if any).
  void run_blocks(const Weight& w, const void* a, int m, const std::function<float*(int)>& out_of,
                  const Epilogue* epilogue) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shmoe::moe
