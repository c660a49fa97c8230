// The FP8 token-row entry points of include/shmoe/moe.h (DeepEP's low-latency dispatch format)
// over numeric/fp8_blocks.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "moe/c_api_guard.hpp"
#include "numeric/fp8_blocks.hpp"
#include "shmoe/moe.h"

namespace {

using shmoe::moe::Refused;
using shmoe::moe::c_api::guarded;
using shmoe::moe::c_api::require_nonnull;

constexpr int kBlock = 128;

std::size_t row_bytes(int cols) {
  return static_cast<std::size_t>(cols) + static_cast<std::size_t>(cols / kBlock) * sizeof(float);
}

void check_cols(int cols, const char* fn) {
  if (cols < kBlock || cols % kBlock != 0)
    throw Refused(std::string(fn) + ": cols=" + std::to_string(cols) +
                  " is not a positive multiple of 128");
}

}  // namespace

extern "C" {

size_t shmoe_fp8_token_row_bytes(int cols) {
  return cols < kBlock || cols % kBlock != 0 ? 0 : row_bytes(cols);
}

int shmoe_fp8_quantize_token_rows(const uint16_t* src, size_t rows, int cols, int round_scale,
                                  uint8_t* dst) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_fp8_quantize_token_rows";
    require_nonnull(src, fn, "src");
    require_nonnull(dst, fn, "dst");
    check_cols(cols, fn);
    const auto n = static_cast<std::size_t>(cols);
    for (std::size_t r = 0; r < rows; ++r) {
      std::uint8_t* row = dst + r * row_bytes(cols);
      // Block by block, so that each scale is copied into the packed (maybe unaligned) row.
      for (std::size_t b = 0; b < n / kBlock; ++b) {
        float scale = 0;
        shmoe::numeric::quantize_fp8_blocks_bf16(src + r * n + b * kBlock, kBlock, kBlock,
                                                 round_scale != 0, row + b * kBlock, &scale);
        std::memcpy(row + n + b * sizeof(float), &scale, sizeof(float));
      }
    }
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_fp8_unpack_token_rows(const uint8_t* src, size_t rows, int cols, uint16_t* values,
                                float* scales) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_fp8_unpack_token_rows";
    require_nonnull(src, fn, "src");
    require_nonnull(values, fn, "values");
    require_nonnull(scales, fn, "scales");
    check_cols(cols, fn);
    const auto n = static_cast<std::size_t>(cols);
    const std::size_t blocks = n / kBlock;
    for (std::size_t r = 0; r < rows; ++r) {
      const std::uint8_t* row = src + r * row_bytes(cols);
      shmoe::numeric::fp8_e4m3_to_bf16(row, n, values + r * n);
      std::memcpy(scales + r * blocks, row + n, blocks * sizeof(float));
    }
    return int{SHMOE_MOE_OK};
  });
}

}  // extern "C"
