#include "moe/combine_reduce.hpp"

#include <vector>

#include "common/cpu_features.hpp"

namespace shmoe::moe {
namespace {

// One token's rows that take part (the slots with an expert), in increasing slot order.
struct TokenRows {
  std::vector<const std::byte*> rows;
  std::vector<float> scales;
  int n = 0;

  explicit TokenRows(int topk) : rows(topk), scales(topk) {}
  void gather(const WeightedRows& w, std::size_t t) {
    n = 0;
    for (int k = 0; k < w.topk; ++k) {
      const std::size_t i = t * w.topk + k;
      if (w.expert_ids[i] < 0) continue;
      rows[n] = w.row_at ? w.row_at[i] : w.rows + i * w.row_bytes;
      scales[n++] = w.weights[i];
    }
  }
};

// Columns [col, col + width) of one token: the accumulators start at zero and take every row's
// product in turn, then are rounded once (to kOut: the element type, or float32 where the caller
// adds to the sum before rounding). The element type and the block width are constants, so
// the compiler keeps a full-width block's accumulators in registers while the rows stream past
// (a multiply and an add each, never fused: see CMakeLists); every element sees the same
// operations in the same order whatever the width, which is what keeps all paths bit-identical.
template <DType kType, DType kOut, int kBlock>
inline __attribute__((always_inline)) void reduce_block(const TokenRows& r, std::size_t col,
                                                        int width, std::byte* out) {
  constexpr std::size_t kSize = dtype_size(kType);
  // A block's rows are read about 8 blocks ahead, so their lines are on the way when needed.
  constexpr std::size_t kAhead = 8 * kBlock * kSize;
  float acc[kBlock];
  for (int j = 0; j < kBlock; ++j) acc[j] = 0.0f;
  for (int k = 0; k < r.n; ++k) {
    const std::byte* __restrict src = r.rows[k] + col * kSize;
    const float scale = r.scales[k];
    if (width == kBlock) {
      __builtin_prefetch(src + kAhead);
      for (int j = 0; j < kBlock; ++j) acc[j] += load_f32(kType, src, j) * scale;
    } else {
      for (int j = 0; j < width; ++j) acc[j] += load_f32(kType, src, j) * scale;
    }
  }
  std::byte* __restrict dst = out + col * dtype_size(kOut);
  if (width == kBlock) {
    for (int j = 0; j < kBlock; ++j) store_f32(kOut, dst, j, acc[j]);
  } else {
    for (int j = 0; j < width; ++j) store_f32(kOut, dst, j, acc[j]);
  }
}

// Each token's columns a register block at a time. The vector paths take 32 columns, one cache
// line of 16-bit elements, so every row read is whole lines and each is prefetched once; the
// baseline takes 16, four SSE registers of accumulators.
template <DType kType, DType kOut, int kBlock>
inline __attribute__((always_inline)) void reduce_tokens(const WeightedRows& w, std::size_t first,
                                                         std::size_t last) {
  TokenRows r(w.topk);
  const std::size_t hidden = static_cast<std::size_t>(w.hidden);
  for (std::size_t t = first; t < last; ++t) {
    r.gather(w, t);
    std::byte* out = static_cast<std::byte*>(w.out) + t * hidden * dtype_size(kOut);
    std::size_t col = 0;
    for (; col + kBlock <= hidden; col += kBlock)
      reduce_block<kType, kOut, kBlock>(r, col, kBlock, out);
    if (col < hidden)
      reduce_block<kType, kOut, kBlock>(r, col, static_cast<int>(hidden - col), out);
  }
}

constexpr int kBaselineBlock = 16;

template <DType kType, DType kOut>
void reduce_typed(const WeightedRows& w, std::size_t first, std::size_t last) {
  reduce_tokens<kType, kOut, kBaselineBlock>(w, first, last);
}

#if defined(__x86_64__) || defined(__i386__)
// The same loops in wider registers where the CPU has them (no FMA in either target, so the bits
// are those of the baseline): AVX2 holds a 32-column block in four registers, AVX-512 in two.
template <DType kType, DType kOut>
__attribute__((target("avx2"))) void reduce_typed_avx2(const WeightedRows& w, std::size_t first,
                                                       std::size_t last) {
  reduce_tokens<kType, kOut, 32>(w, first, last);
}
template <DType kType, DType kOut>
__attribute__((target("avx512f,avx512bw,prefer-vector-width=512"))) void reduce_typed_avx512(
    const WeightedRows& w, std::size_t first, std::size_t last) {
  reduce_tokens<kType, kOut, 32>(w, first, last);
}
#endif

template <DType kType, DType kOut>
void reduce_to(ReducePath path, const WeightedRows& w, std::size_t first, std::size_t last) {
  switch (path) {
#if defined(__x86_64__) || defined(__i386__)
    case ReducePath::kAvx512:
      return reduce_typed_avx512<kType, kOut>(w, first, last);
    case ReducePath::kAvx2:
      return reduce_typed_avx2<kType, kOut>(w, first, last);
#else
    case ReducePath::kAvx512:
    case ReducePath::kAvx2:
#endif
    case ReducePath::kBaseline:
      return reduce_typed<kType, kOut>(w, first, last);
  }
}

template <DType kType>
void reduce_on(ReducePath path, const WeightedRows& w, std::size_t first, std::size_t last) {
  if (w.out_float32) return reduce_to<kType, DType::kFloat32>(path, w, first, last);
  reduce_to<kType, kType>(path, w, first, last);
}

}  // namespace

bool reduce_path_available(ReducePath path) {
  switch (path) {
    case ReducePath::kAvx512:
      return cpu_has_avx512bw();
    case ReducePath::kAvx2:
      return cpu_has_avx2();
    case ReducePath::kBaseline:
      return true;
  }
  return false;
}

ReducePath best_reduce_path() {
  static const ReducePath kBest = reduce_path_available(ReducePath::kAvx512) ? ReducePath::kAvx512
                                  : reduce_path_available(ReducePath::kAvx2)
                                      ? ReducePath::kAvx2
                                      : ReducePath::kBaseline;
  return kBest;
}

void reduce_weighted_rows_on(ReducePath path, const WeightedRows& w, std::size_t first,
                             std::size_t last) {
  if (!reduce_path_available(path)) path = ReducePath::kBaseline;
  switch (w.dtype) {
    case DType::kInt32:
      return reduce_on<DType::kInt32>(path, w, first, last);
    case DType::kFloat16:
      return reduce_on<DType::kFloat16>(path, w, first, last);
    case DType::kBFloat16:
      return reduce_on<DType::kBFloat16>(path, w, first, last);
    case DType::kFloat32:
      return reduce_on<DType::kFloat32>(path, w, first, last);
  }
}

void reduce_weighted_rows(const WeightedRows& w, std::size_t first, std::size_t last) {
  reduce_weighted_rows_on(best_reduce_path(), w, first, last);
}

}  // namespace shmoe::moe
