// The MegaMoE and MX FP8 entry points of include/shmoe/moe.h over the C++ operator and quantizer.
#include <algorithm>
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

using shmoe::moe::c_api::fp8_format_of;
using shmoe::moe::c_api::mega_config_of;

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
    const auto f = fp8_format_of(format, fn);
    const shmoe::moe::MxRow layout{cols};
    for (std::size_t r = 0; r < rows; ++r) {
      std::uint8_t* row = dst + r * layout.bytes();
      quantize(src + r * static_cast<std::size_t>(cols), static_cast<std::size_t>(cols), f, row,
               row + layout.scales_offset(), shmoe::numeric::MxKernel::kAuto);
    }
    return int{SHMOE_MOE_OK};
  });
}

// The first version of shmoe_mega_moe_info_t ends with gemm_engine (shmoe/moe.h, "Extensible
// structs").
constexpr std::size_t kInfoFirst = SHMOE_FIRST_SIZE(shmoe_mega_moe_info_t, gemm_engine);

std::size_t symmetric_bytes(const shmoe_mega_moe_config_t* config, int n_pes, bool unfused,
                            const char* fn) {
  std::size_t bytes = 0;
  const int status = guarded([&] {
    bytes = shmoe::moe::MegaMoE::symmetric_bytes(
        shmoe::moe::c_api::checked_mega_config(config, n_pes, fn), n_pes, unfused);
    return int{SHMOE_MOE_OK};
  });
  return status == SHMOE_MOE_OK ? bytes : 0;
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
    const auto f = fp8_format_of(format, fn);
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
    const auto c = mega_config_of(config, fn);
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
  return symmetric_bytes(config, n_pes, false, "shmoe_mega_moe_symmetric_bytes");
}

size_t shmoe_mega_moe_unfused_symmetric_bytes(const shmoe_mega_moe_config_t* config, int n_pes) {
  return symmetric_bytes(config, n_pes, true, "shmoe_mega_moe_unfused_symmetric_bytes");
}

int shmoe_mega_moe_info(shmoe_mega_moe_t mega, shmoe_mega_moe_info_t* info) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_mega_moe_info";
    const auto& layer = require(mega, fn, "mega").layer;
    const auto& c = layer.config();
    shmoe_mega_moe_info_t out{};
    out.weights = c.weights == shmoe::moe::MegaWeights::kFp8 ? SHMOE_MEGA_WEIGHTS_FP8
                                                             : SHMOE_MEGA_WEIGHTS_BF16;
    out.schedule = static_cast<shmoe_mega_schedule_t>(static_cast<int>(c.schedule));
    out.matrix_workers = c.workers.matrix;
    out.vector_workers = c.workers.vector;
    out.weight_bytes = layer.weight_bytes();
    const std::string engine = layer.gemm_engine();
    engine.copy(out.gemm_engine, sizeof out.gemm_engine - 1);
    out.wave_rows = c.wave_rows;
    shmoe::moe::c_api::write_struct(info, out, kInfoFirst, fn, "info");
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_mega_moe_set_tracing(shmoe_mega_moe_t mega, int on) {
  return guarded([&] {
    require(mega, "shmoe_mega_moe_set_tracing", "mega").layer.set_tracing(on != 0);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_mega_moe_last_trace(shmoe_mega_moe_t mega, size_t capacity, int* worker,
                              const char** stage, int* index, double* begin_us, double* end_us) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_mega_moe_last_trace";
    const auto events = require(mega, fn, "mega").layer.last_trace();
    const std::size_t n = std::min(capacity, events.size());
    if (n > 0) {
      for (const void* p : {static_cast<const void*>(worker), static_cast<const void*>(stage),
                            static_cast<const void*>(index), static_cast<const void*>(begin_us),
                            static_cast<const void*>(end_us)})
        require_nonnull(p, fn, "worker, stage, index, begin_us and end_us");
    }
    for (std::size_t i = 0; i < n; ++i) {
      worker[i] = events[i].worker;
      stage[i] = events[i].stage.data();  // a string literal: NUL-terminated, static
      index[i] = events[i].index;
      begin_us[i] = events[i].begin_us;
      end_us[i] = events[i].end_us;
    }
    return static_cast<int>(events.size());
  });
}

}  // extern "C"
