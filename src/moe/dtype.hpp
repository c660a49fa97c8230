// Element types the MoE operators carry, and their conversion to and from fp32 for arithmetic.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "numeric/half.hpp"

namespace shmoe::moe {

enum class DType : std::uint8_t { kInt32 = 0, kFloat16 = 1, kBFloat16 = 2, kFloat32 = 3 };

constexpr std::size_t dtype_size(DType t) {
  return t == DType::kInt32 || t == DType::kFloat32 ? 4 : 2;
}
std::string_view dtype_name(DType t);
// Accepts "int32", "int32_t", "float16", "fp16", "half", "bfloat16", "bf16", "float32", "fp32",
// "float".
std::optional<DType> parse_dtype(std::string_view name);

inline float load_f32(DType t, const void* row, std::size_t i) {
  switch (t) {
    case DType::kInt32: {
      std::int32_t v;
      std::memcpy(&v, static_cast<const char*>(row) + 4 * i, 4);
      return static_cast<float>(v);
    }
    case DType::kFloat16:
      return numeric::fp16_to_float({static_cast<const std::uint16_t*>(row)[i]});
    case DType::kBFloat16:
      return numeric::bf16_to_float({static_cast<const std::uint16_t*>(row)[i]});
    case DType::kFloat32:
      return static_cast<const float*>(row)[i];
  }
  return 0;
}

// int32 results round to nearest (ties to even) and saturate; floats round to nearest even.
inline void store_f32(DType t, void* row, std::size_t i, float v) {
  switch (t) {
    case DType::kInt32: {
      float r = std::nearbyint(v);
      std::int32_t q = !(r == r)            ? 0
                       : r >= 2147483648.0f ? INT32_MAX
                       : r < -2147483648.0f ? INT32_MIN
                                            : static_cast<std::int32_t>(r);
      std::memcpy(static_cast<char*>(row) + 4 * i, &q, 4);
      return;
    }
    case DType::kFloat16:
      static_cast<std::uint16_t*>(row)[i] = numeric::float_to_fp16(v).bits;
      return;
    case DType::kBFloat16:
      static_cast<std::uint16_t*>(row)[i] = numeric::float_to_bf16(v).bits;
      return;
    case DType::kFloat32:
      static_cast<float*>(row)[i] = v;
      return;
  }
}

}  // namespace shmoe::moe
