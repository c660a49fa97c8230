// The MegaMoE and MX FP8 entry points of include/shmoe/moe.h over the C++ operator and quantizer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "moe/c_api_guard.hpp"
#include "moe/expert_ffn.hpp"
#include "moe/mega_moe.hpp"
#include "numeric/mx.hpp"
#include "shmoe/moe.h"

struct shmoe_mega_moe {
  shmoe::moe::MegaMoE layer;
};

namespace {

using shmoe::moe::Refused;
using shmoe::moe::c_api::guarded;
using shmoe::moe::c_api::require;
using shmoe::moe::c_api::require_nonnull;

shmoe::numeric::Fp8Format format_of(const shmoe_fp8_format_t& f, const char* fn) {
  const int value = shmoe::moe::c_api::raw_enum_value(f);
  if (value == SHMOE_FP8_E4M3) return shmoe::numeric::Fp8Format::kE4M3;
  if (value == SHMOE_FP8_E5M2) return shmoe::numeric::Fp8Format::kE5M2;
  throw Refused(std::string(fn) + ": format=" + std::to_string(value) +
                " is not SHMOE_FP8_E4M3 (0) or SHMOE_FP8_E5M2 (1)");
}

shmoe::moe::MegaWeights weights_of(const shmoe_mega_weights_t& w, const char* fn) {
  const int value = shmoe::moe::c_api::raw_enum_value(w);
  if (value == SHMOE_MEGA_WEIGHTS_AUTO) return shmoe::moe::MegaWeights::kAuto;
  if (value == SHMOE_MEGA_WEIGHTS_FP8) return shmoe::moe::MegaWeights::kFp8;
  if (value == SHMOE_MEGA_WEIGHTS_BF16) return shmoe::moe::MegaWeights::kBf16;
  throw Refused(std::string(fn) + ": weights=" + std::to_string(value) +
                " is not SHMOE_MEGA_WEIGHTS_AUTO (0), SHMOE_MEGA_WEIGHTS_FP8 (1) or "
                "SHMOE_MEGA_WEIGHTS_BF16 (2)");
}

// The first version of shmoe_mega_moe_config_t ends with weights (shmoe/moe.h, "Extensible
// structs").
constexpr std::size_t kConfigFirst = SHMOE_FIRST_SIZE(shmoe_mega_moe_config_t, weights);

shmoe::moe::MegaMoEConfig config_of(const shmoe_mega_moe_config_t* config, const char* fn) {
  const auto in = shmoe::moe::c_api::read_struct(config, kConfigFirst, fn, "config");
  shmoe::moe::MegaMoEConfig c;
  c.tokens = in.max_tokens_per_pe;
  c.model_dim = in.hidden;
  c.ffn_dim = in.intermediate_hidden;
  c.topk = in.num_topk;
  c.experts_per_pe = in.num_experts_per_pe;
  c.format = format_of(in.format, fn);
  c.max_received_tokens = in.max_recv_rows;
  c.workers = {in.matrix_workers, in.vector_workers};
  if (in.wave_rows != 0) c.wave_rows = in.wave_rows;
  c.weights = weights_of(in.weights, fn);
  return c;
}

// The row shape of the MX helpers: cols >= 1 and the buffers present.
void check_rows(const void* src, const void* dst, int cols, const char* fn) {
  require_nonnull(src, fn, "src");
  require_nonnull(dst, fn, "dst");
  if (cols < 1) throw Refused(std::string(fn) + ": cols=" + std::to_string(cols) + " is not >= 1");
}

// Rows of `cols` values of T at src into MX rows at dst, by `quantize` (fp32 or bf16 values).
template <typename T, typename Quantize>
int quantize_rows(const T* src, std::size_t rows, int cols, shmoe_fp8_format_t format,
                  std::uint8_t* dst, const char* fn, Quantize quantize) {
  return guarded([&] {
    check_rows(src, dst, cols, fn);
    const auto f = format_of(format, fn);
    const shmoe::moe::MxRow layout{cols};
    for (std::size_t r = 0; r < rows; ++r) {
      std::uint8_t* row = dst + r * layout.bytes();
      quantize(src + r * static_cast<std::size_t>(cols), static_cast<std::size_t>(cols), f, row,
               row + layout.scales_offset(), shmoe::numeric::MxKernel::kAuto);
    }
    return int{SHMOE_MOE_OK};
  });
}

// One run of the layer, fused or through the unfused chain.
int run_layer(shmoe_mega_moe_t mega, const char* fn, bool unfused,
              const shmoe::moe::MegaMoEArgs& args) {
  return guarded([&] {
    auto& m = require(mega, fn, "mega");
    unfused ? m.layer.run_unfused(args) : m.layer.run(args);
    return int{SHMOE_MOE_OK};
  });
}

}  // namespace

extern "C" {

size_t shmoe_mx_row_bytes(int elems) {
  return elems < 1 ? 0 : shmoe::moe::MxRow{elems}.bytes();
}

int shmoe_mx_quantize_rows(const float* src, size_t rows, int cols, shmoe_fp8_format_t format,
                           uint8_t* dst) {
  return quantize_rows(src, rows, cols, format, dst, "shmoe_mx_quantize_rows",
                       shmoe::numeric::quantize_mx);
}

int shmoe_mx_quantize_bf16_rows(const uint16_t* src, size_t rows, int cols,
                                shmoe_fp8_format_t format, uint8_t* dst) {
  return quantize_rows(src, rows, cols, format, dst, "shmoe_mx_quantize_bf16_rows",
                       shmoe::numeric::quantize_mx_bf16);
}

int shmoe_mx_dequantize_rows(const uint8_t* src, size_t rows, int cols, shmoe_fp8_format_t format,
                             float* dst) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_mx_dequantize_rows";
    check_rows(src, dst, cols, fn);
    const auto f = format_of(format, fn);
    const shmoe::moe::MxRow layout{cols};
    for (std::size_t r = 0; r < rows; ++r) {
      const std::uint8_t* row = src + r * layout.bytes();
      shmoe::numeric::dequantize_mx(row, row + layout.scales_offset(), cols, f,
                                    dst + r * static_cast<std::size_t>(cols));
    }
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_mega_moe_create(const shmoe_mega_moe_config_t* config, const uint8_t* const* w1,
                          const uint8_t* const* w2, shmoe_mega_moe_t* mega) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_mega_moe_create";
    const auto c = config_of(config, fn);
    auto& handle = require(mega, fn, "mega");
    require_nonnull(w1, fn, "w1");
    require_nonnull(w2, fn, "w2");
    shmoe::moe::MegaMoEWeights weights;
    if (c.experts_per_pe > 0) {
      weights.w1.assign(w1, w1 + c.experts_per_pe);
      weights.w2.assign(w2, w2 + c.experts_per_pe);
    }
    handle = new shmoe_mega_moe{shmoe::moe::MegaMoE(c, weights)};
    return int{SHMOE_MOE_OK};
  });
}

void shmoe_mega_moe_destroy(shmoe_mega_moe_t mega) {
  delete mega;
}

int shmoe_mega_moe_run(shmoe_mega_moe_t mega, const uint16_t* x, const int32_t* topk_idx,
                       const float* topk_weights, int num_tokens, uint16_t* y,
                       int32_t* num_recv_tokens_per_expert) {
  return run_layer(mega, "shmoe_mega_moe_run", false,
                   {x, topk_idx, topk_weights, num_tokens, y, num_recv_tokens_per_expert});
}

int shmoe_mega_moe_run_unfused(shmoe_mega_moe_t mega, const uint16_t* x, const int32_t* topk_idx,
                               const float* topk_weights, int num_tokens, uint16_t* y,
                               int32_t* num_recv_tokens_per_expert) {
  return run_layer(mega, "shmoe_mega_moe_run_unfused", true,
                   {x, topk_idx, topk_weights, num_tokens, y, num_recv_tokens_per_expert});
}

double shmoe_mega_moe_last_kernel_us(shmoe_mega_moe_t mega) {
  return mega == nullptr ? 0.0 : mega->layer.last_kernel_us();
}

size_t shmoe_mega_moe_symmetric_bytes(const shmoe_mega_moe_config_t* config, int n_pes) {
  std::size_t bytes = 0;
  const int status = guarded([&] {
    constexpr const char* fn = "shmoe_mega_moe_symmetric_bytes";
    bytes = shmoe::moe::MegaMoE::symmetric_bytes(config_of(config, fn), n_pes, false);
    return int{SHMOE_MOE_OK};
  });
  return status == SHMOE_MOE_OK ? bytes : 0;
}

}  // extern "C"
