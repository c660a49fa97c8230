// An MX FP8 weight matrix kept as FP8 (one byte per element plus one E8M0 scale per 32: 1.03
// bytes per parameter) and multiplied with a few rows by kernels that read the codes directly:
// the GEMM of small batches, bound by reading the weights, where expanding them to bf16 first
// would read and write them again.
//
// Layout. Rows go in groups of 4 and columns in chunks of 64 (padded with +0 codes, which add +0
// products and so change no sum): a group's chunk is 4 x 64 contiguous codes, row by row, then
// the next chunk, so that a kernel working on 4 rows at once reads one stream. Reading 4 rows
// 2 KB apart instead ran at half the speed. The AVX512-BF16 kernel's chunks are stored in the
// order its byte unpacking puts back. The codes lie on huge pages where the system grants them
// (common/huge_pages.hpp).
//
// Sums. The portable, AVX2 and AVX-512 kernels add the same fp32 values in the same order and so
// give the same bits: a weight is decode(code) * 2^(scale - 127) (exact), each product
// a[k] * w[k] one fused multiply-add on 16 lanes (lane l takes, block by block, element 32b + l,
// then 32b + 16 + l), and the lanes are added l + (l + 8), then + 4, + 2, + 1. They decode
// through fp16 (an E5M2 code is the top byte of an fp16; an E4M3 code, sign-extended and shifted,
// an fp16 of its value times 2^-8). The AVX512-BF16 kernel looks the codes up as bf16 (exact),
// moves each block's scale into their exponents (relative to the matrix's largest scale, whose
// power of two multiplies the finished sums: exact) and adds the pairs' products straight into
// the sums with VDPBF16PS. Those are the same products, added in another order (and, as the
// instruction does, flushing values below 2^-126 to zero), so within the fp32 summation bound of
// the others rather than equal to them; a row's sums are the same bits however many rows of a
// come with it. It is chosen only for matrices whose scales keep every value, and every value
// relative to the largest scale, a normal bf16 (scales 2^-107 to 2^112, spanning at most 2^117
// for E4M3 and 2^110 for E5M2); it stores -0 codes as +0. A matrix with NaN codes or scales of
// 2^120 and above goes to the portable kernel whatever was asked. The SIMD kernels take a group's 4
// rows against up to 4 (AVX-512, BF16) or 2 (AVX2) rows of a at a time, group by group: a tile of
// more rows reads the codes from memory once. The BF16 kernel, the one fast enough to wait on
// memory, reads its codes through common/read_ahead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/huge_pages.hpp"
#include "numeric/fp8.hpp"
#include "numeric/mx.hpp"

namespace shmoe::numeric {

enum class MatrixKernel : std::uint8_t { kAuto, kPortable, kAvx2, kAvx512, kAvx512Bf16 };
bool matrix_kernel_available(MatrixKernel k);
// "portable", "avx2", "avx512", "avx512-bf16" or "auto", for reports.
const char* matrix_kernel_name(MatrixKernel k);

// The type of the rows a kernel multiplies: fp32, or bf16 bit patterns (kAvx512Bf16).
enum class RowType : std::uint8_t { kF32, kBf16 };

class MxWeightMatrix {
 public:
  static constexpr int kGroupRows = 4;
  static constexpr int kChunk = 64;

  MxWeightMatrix() = default;
  // n rows of `cols` MX elements, each row `cols` codes then its scales, rows `stride` bytes
  // apart. kAuto: the fastest kernel the CPU has; one it lacks: the next narrower.
  MxWeightMatrix(const std::uint8_t* rows, std::size_t stride, int n, int cols, Fp8Format f,
                 MatrixKernel k = MatrixKernel::kAuto);

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  int padded_cols() const { return padded_cols_; }  // cols rounded up to kChunk
  MatrixKernel kernel() const { return kernel_; }   // the one that runs
  RowType row_type() const;
  std::size_t bytes() const { return codes_.size() + scales_.size(); }

  // out[r * ldo + j] = sum over k of a[r][k] * w[j][k] for r < m, j < rows(): a holds m rows of
  // padded_cols() elements of row_type(), zero past cols().
  void times_rows(const void* a, int m, float* out, std::size_t ldo) const;

  // The values, exact, as rows() contiguous rows of cols() elements of type t: for products too
  // tall for times_rows to pay, which a GEMM library then runs.
  void expand(RowType t, void* out) const;

  // The parts the kernels read (mx_matrix_*.cpp).
  struct View {
    const std::uint8_t* codes;
    const std::uint8_t* scales;
    int rows, padded_cols;
    Fp8Format format;
    std::uint8_t max_scale;  // the largest of scales (the AVX512-BF16 kernel's reference)
    // Where a group's chunk starts among the codes; its scales start at a 32nd of it.
    std::size_t chunk_offset(int group, int chunk) const {
      return (static_cast<std::size_t>(group) * padded_cols + chunk * kChunk) * kGroupRows;
    }
    const std::uint8_t* chunk(int group, int chunk) const {
      return codes + chunk_offset(group, chunk);
    }
    const std::uint8_t* chunk_scales(int group, int chunk) const {
      return scales + chunk_offset(group, chunk) / 32;
    }
  };

 private:
  View view() const {
    return {codes_.data(), scales_.data(), rows_, padded_cols_, format_, max_scale_};
  }

  std::vector<std::uint8_t, HugePageAllocator<std::uint8_t>> codes_;  // read once per call
  std::vector<std::uint8_t> scales_;
  int rows_ = 0, cols_ = 0, padded_cols_ = 0;
  Fp8Format format_ = Fp8Format::kE4M3;
  std::uint8_t max_scale_ = 0;
  MatrixKernel kernel_ = MatrixKernel::kPortable;
};

// The kernels, over a view (a's rows as above). Internal to src/numeric.
namespace mx_matrix_kernels {
using View = MxWeightMatrix::View;
void portable(const View& w, const float* a, int m, float* out, std::size_t ldo);
bool cpu_has_f16c();
bool avx2_available();
void avx2(const View& w, const float* a, int m, float* out, std::size_t ldo);
bool avx512_available();
void avx512(const View& w, const float* a, int m, float* out, std::size_t ldo);
bool avx512_bf16_available();
void avx512_bf16(const View& w, const std::uint16_t* a, int m, float* out, std::size_t ldo);
// expand() of a matrix stored for avx512_bf16, `cols` elements per row.
void avx512_bf16_expand(const View& w, int cols, RowType t, void* out);
// Where the AVX512-BF16 kernel wants code k (0..63) of a chunk stored.
int bf16_chunk_position(int k);
// The F16C kernels' multiplier of a block: E5M2 codes decode to their values, E4M3 codes to their
// values times 2^-8, which the multiplier puts back (exact: scales stay below 2^120).
constexpr float simd_multiplier(Fp8Format f, std::uint8_t scale) {
  return e8m0_to_float(scale) * (f == Fp8Format::kE4M3 ? 256.0f : 1.0f);
}
}  // namespace mx_matrix_kernels

}  // namespace shmoe::numeric
