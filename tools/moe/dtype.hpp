// The element types shmoe-moe runs the operators with (shmoe_dtype_t), their names on the command
// line and in the CSVs, and their conversions to and from fp32 for the workload's arithmetic.
// The conversions are the tool's own, written from the formats' definitions (IEEE binary16,
// bfloat16 as the top half of binary32), so that the references the tool checks the library
// against do not share its code.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "shmoe/moe.h"

namespace shmoe::tools {

using DType = shmoe_dtype_t;

constexpr std::size_t dtype_size(DType t) {
  return t == SHMOE_DTYPE_INT32 || t == SHMOE_DTYPE_FLOAT32 ? 4 : 2;
}
// int32, float16, bfloat16, float32.
std::string_view dtype_name(DType t);
// Accepts "int32", "int32_t", "int", "float16", "fp16", "half", "float16_t", "bfloat16", "bf16",
// "bfloat16_t", "float32", "fp32", "float", "float32_t".
std::optional<DType> parse_dtype(std::string_view name);

inline std::uint32_t float_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline float bits_float(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

inline float bf16_to_float(std::uint16_t h) {
  return bits_float(std::uint32_t{h} << 16);
}
// Rounds to nearest even; a NaN stays a (quiet) NaN.
inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t b = float_bits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((b >> 16) | 0x40);
  return static_cast<std::uint16_t>((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}

inline float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24, exact in fp32
    const float v = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}
// Rounds to nearest even, to infinity from 65520 up; subnormals below 2^-14.
inline std::uint16_t float_to_fp16(float f) {
  const std::uint32_t b = float_bits(f);
  const auto sign = static_cast<std::uint16_t>((b >> 16) & 0x8000u);
  const std::uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00;       // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00;      // 65520 and up, and infinity
  if (a < 0x38800000u) {                           // below 2^-14: a multiple of 2^-24
    const float scaled = bits_float(a) * 0x1p24f;  // exact: a power of two
    return sign | static_cast<std::uint16_t>(std::nearbyint(scaled));
  }
  return sign | static_cast<std::uint16_t>((a - 0x38000000u + 0xfffu + ((a >> 13) & 1)) >> 13);
}

inline float load_f32(DType t, const void* row, std::size_t i) {
  switch (t) {
    case SHMOE_DTYPE_INT32: {
      std::int32_t v;
      std::memcpy(&v, static_cast<const char*>(row) + 4 * i, 4);
      return static_cast<float>(v);
    }
    case SHMOE_DTYPE_FLOAT16:
      return fp16_to_float(static_cast<const std::uint16_t*>(row)[i]);
    case SHMOE_DTYPE_BFLOAT16:
      return bf16_to_float(static_cast<const std::uint16_t*>(row)[i]);
    case SHMOE_DTYPE_FLOAT32:
      return static_cast<const float*>(row)[i];
    default:  // an MoE buffer carries only the four types above
      break;
  }
  return 0;
}

// int32 results round to nearest (ties to even) and saturate; floats round to nearest even.
inline void store_f32(DType t, void* row, std::size_t i, float v) {
  switch (t) {
    case SHMOE_DTYPE_INT32: {
      const float r = std::nearbyint(v);
      const std::int32_t q = !(r == r)            ? 0
                             : r >= 2147483648.0f ? INT32_MAX
                             : r < -2147483648.0f ? INT32_MIN
                                                  : static_cast<std::int32_t>(r);
      std::memcpy(static_cast<char*>(row) + 4 * i, &q, 4);
      return;
    }
    case SHMOE_DTYPE_FLOAT16:
      static_cast<std::uint16_t*>(row)[i] = float_to_fp16(v);
      return;
    case SHMOE_DTYPE_BFLOAT16:
      static_cast<std::uint16_t*>(row)[i] = float_to_bf16(v);
      return;
    case SHMOE_DTYPE_FLOAT32:
      static_cast<float*>(row)[i] = v;
      return;
    default:  // an MoE buffer carries only the four types above
      return;
  }
}

}  // namespace shmoe::tools
