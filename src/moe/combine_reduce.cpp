#include "moe/combine_reduce.hpp"

#include <algorithm>

namespace shmoe::moe {
namespace {

// The element type is resolved once per call, so the inner loops are plain conversions,
// multiplies and adds that the compiler vectorises (without fusing them: see CMakeLists). Each
// token is summed a slice of columns at a time, so that the slice's accumulators stay in L1 while
// the top-k rows stream past once; every element still sees the same operations in the same order.
template <DType kType>
inline __attribute__((always_inline)) void reduce_slices(const WeightedRows& w, std::size_t first,
                                                         std::size_t last) {
  constexpr int kSlice = 512;
  float acc[kSlice];
  for (std::size_t t = first; t < last; ++t) {
    void* out = static_cast<std::byte*>(w.out) + t * w.row_bytes;
    for (int j0 = 0; j0 < w.hidden; j0 += kSlice) {
      const int n = std::min(kSlice, w.hidden - j0);
      std::fill(acc, acc + n, 0.0f);
      for (int k = 0; k < w.topk; ++k) {
        const std::size_t i = t * w.topk + k;
        if (w.expert_ids[i] < 0) continue;
        const float scale = w.weights[i];
        const std::byte* row = w.row_at ? w.row_at[i] : w.rows + i * w.row_bytes;
        const std::byte* __restrict slice = row + j0 * dtype_size(kType);
        for (int j = 0; j < n; ++j) acc[j] += load_f32(kType, slice, j) * scale;
      }
      std::byte* __restrict out_slice = static_cast<std::byte*>(out) + j0 * dtype_size(kType);
      for (int j = 0; j < n; ++j) store_f32(kType, out_slice, j, acc[j]);
    }
  }
}

template <DType kType>
void reduce_typed(const WeightedRows& w, std::size_t first, std::size_t last) {
  reduce_slices<kType>(w, first, last);
}

#if defined(__x86_64__) || defined(__i386__)
// The same loops in AVX2 registers where the CPU has them: twice the lanes of the baseline for a
// reduction that otherwise runs slower than memory. Not FMA (the target leaves it out), so the
// bits are those of the baseline.
template <DType kType>
__attribute__((target("avx2"))) void reduce_typed_avx2(const WeightedRows& w, std::size_t first,
                                                       std::size_t last) {
  reduce_slices<kType>(w, first, last);
}
bool cpu_has_avx2() {
  static const bool kHas = (__builtin_cpu_init(), __builtin_cpu_supports("avx2") != 0);
  return kHas;
}
#endif

template <DType kType>
void reduce_dispatched(const WeightedRows& w, std::size_t first, std::size_t last) {
#if defined(__x86_64__) || defined(__i386__)
  if (cpu_has_avx2()) return reduce_typed_avx2<kType>(w, first, last);
#endif
  reduce_typed<kType>(w, first, last);
}

}  // namespace

void reduce_weighted_rows(const WeightedRows& w, std::size_t first, std::size_t last) {
  switch (w.dtype) {
    case DType::kInt32:
      return reduce_dispatched<DType::kInt32>(w, first, last);
    case DType::kFloat16:
      return reduce_dispatched<DType::kFloat16>(w, first, last);
    case DType::kBFloat16:
      return reduce_dispatched<DType::kBFloat16>(w, first, last);
    case DType::kFloat32:
      return reduce_dispatched<DType::kFloat32>(w, first, last);
  }
}

}  // namespace shmoe::moe
