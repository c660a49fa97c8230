#include "moe/combine_reduce.hpp"

#include <algorithm>
#include <vector>

namespace shmoe::moe {
namespace {

// The element type is resolved once per call, so the inner loops are plain conversions,
// multiplies and adds that the compiler vectorises (without fusing them: see CMakeLists).
template <DType kType>
void reduce_typed(const WeightedRows& w, std::size_t first, std::size_t last) {
  std::vector<float> buffer(w.hidden);
  float* __restrict acc = buffer.data();
  for (std::size_t t = first; t < last; ++t) {
    std::fill(acc, acc + w.hidden, 0.0f);
    for (int k = 0; k < w.topk; ++k) {
      const std::size_t i = t * w.topk + k;
      if (w.expert_ids[i] < 0) continue;
      const float scale = w.weights[i];
      const std::byte* __restrict row = w.rows + i * w.row_bytes;
      for (int j = 0; j < w.hidden; ++j) acc[j] += load_f32(kType, row, j) * scale;
    }
    void* out = static_cast<std::byte*>(w.out) + t * w.row_bytes;
    for (int j = 0; j < w.hidden; ++j) store_f32(kType, out, j, acc[j]);
  }
}

}  // namespace

void reduce_weighted_rows(const WeightedRows& w, std::size_t first, std::size_t last) {
  switch (w.dtype) {
    case DType::kInt32:
      return reduce_typed<DType::kInt32>(w, first, last);
    case DType::kFloat16:
      return reduce_typed<DType::kFloat16>(w, first, last);
    case DType::kBFloat16:
      return reduce_typed<DType::kBFloat16>(w, first, last);
    case DType::kFloat32:
      return reduce_typed<DType::kFloat32>(w, first, last);
  }
}

}  // namespace shmoe::moe
