// The configuration entry points of include/shmoe/moe.h (the check, the buffer's symmetric bytes)
// and the conversion of shmoe_moe_config_t that shmoe_moe_buffer_create shares with them. Apart
// from c_api.cpp so that a program can check a configuration before shmem_init (shmoe-moe does,
// before it starts its PEs) and so that its fuzzer compiles the rules without the operators.
#include <string>

#include "moe/c_api_guard.hpp"
#include "moe/config_check.hpp"
#include "moe/mega_moe.hpp"
#include "moe/moe.hpp"
#include "shmem/last_error.hpp"
#include "shmoe/moe.h"
#include "shmoe/runtime.h"

namespace shmoe::moe::c_api {

void set_last_error(std::string text) {
  shmoe::set_last_error(std::move(text));
}

MoeConfig moe_config_of(const shmoe_moe_config_t* config, const char* fn) {
  // The first version of shmoe_moe_config_t ends with double_plane_threshold (appended fields
  // have 0 as their default, so a caller that stops there keeps working).
  constexpr std::size_t kConfigFirst = SHMOE_FIRST_SIZE(shmoe_moe_config_t, double_plane_threshold);
  const auto in = read_struct(config, kConfigFirst, fn, "config");
  MoeConfig c;
  c.experts_per_pe = in.num_experts_per_pe;
  c.max_bs = in.max_tokens_per_pe;
  c.hidden = in.hidden;
  c.topk = in.num_topk;
  const int dtype = raw_enum_value(in.dtype);
  if (dtype < SHMOE_DTYPE_INT32 || dtype > SHMOE_DTYPE_FLOAT32) {
    throw Refused(std::string(fn) + ": config->dtype=" + std::to_string(dtype) +
                  " is out of range (0..3, SHMOE_DTYPE_INT32..SHMOE_DTYPE_FLOAT32)");
  }
  c.dtype = static_cast<DType>(dtype);
  c.max_recv_rows = in.max_recv_rows;
  c.workers = {in.matrix_workers, in.vector_workers};
  if (in.double_plane_threshold != 0) c.doubleplane_threshold = in.double_plane_threshold;
  c.token_side_bytes = in.token_side_bytes;
  c.header_ints = in.header_ints;
  c.shrink_timeout_ms = in.shrink_timeout_ms;
  c.recv_blocks = in.recv_blocks;
  c.recv_block_expert_rows = in.recv_block_expert_rows;
  return c;
}

MoeConfig checked_moe_config(const shmoe_moe_config_t* config, int n_pes, const char* fn) {
  const MoeConfig c = moe_config_of(config, fn);
  if (n_pes < 1)
    throw Refused(std::string(fn) + ": n_pes=" + std::to_string(n_pes) + " is not >= 1");
  MoeConfigNames names;  // the C names already; the workers' message names both fields
  names.workers = "matrix_workers/vector_workers:";
  if (const std::string e = config_error(c, n_pes, names); !e.empty())
    throw Refused(std::string(fn) + ": " + e);
  return c;
}

numeric::Fp8Format fp8_format_of(const shmoe_fp8_format_t& f, const char* fn) {
  const int value = raw_enum_value(f);
  if (value == SHMOE_FP8_E4M3) return numeric::Fp8Format::kE4M3;
  if (value == SHMOE_FP8_E5M2) return numeric::Fp8Format::kE5M2;
  throw Refused(std::string(fn) + ": format=" + std::to_string(value) +
                " is not SHMOE_FP8_E4M3 (0) or SHMOE_FP8_E5M2 (1)");
}

namespace {

MegaWeights weights_of(const shmoe_mega_weights_t& w, const char* fn) {
  const int value = raw_enum_value(w);
  if (value == SHMOE_MEGA_WEIGHTS_AUTO) return MegaWeights::kAuto;
  if (value == SHMOE_MEGA_WEIGHTS_FP8) return MegaWeights::kFp8;
  if (value == SHMOE_MEGA_WEIGHTS_BF16) return MegaWeights::kBf16;
  throw Refused(std::string(fn) + ": weights=" + std::to_string(value) +
                " is not SHMOE_MEGA_WEIGHTS_AUTO (0), SHMOE_MEGA_WEIGHTS_FP8 (1) or "
                "SHMOE_MEGA_WEIGHTS_BF16 (2)");
}

}  // namespace

MegaMoEConfig mega_config_of(const shmoe_mega_moe_config_t* config, const char* fn) {
  // The first version of shmoe_mega_moe_config_t ends with weights (shmoe/moe.h, "Extensible
  // structs"); schedule came after it.
  constexpr std::size_t kConfigFirst = SHMOE_FIRST_SIZE(shmoe_mega_moe_config_t, weights);
  const auto in = read_struct(config, kConfigFirst, fn, "config");
  MegaMoEConfig c;
  c.tokens = in.max_tokens_per_pe;
  c.model_dim = in.hidden;
  c.ffn_dim = in.intermediate_hidden;
  c.topk = in.num_topk;
  c.experts_per_pe = in.num_experts_per_pe;
  c.format = fp8_format_of(in.format, fn);
  c.max_received_tokens = in.max_recv_rows;
  c.workers = {in.matrix_workers, in.vector_workers};
  c.wave_rows = in.wave_rows;
  c.weights = weights_of(in.weights, fn);
  const int schedule = raw_enum_value(in.schedule);
  if (schedule < SHMOE_MEGA_SCHEDULE_AUTO || schedule > SHMOE_MEGA_SCHEDULE_SOLO) {
    throw Refused(std::string(fn) + ": config->schedule=" + std::to_string(schedule) +
                  " is out of range (0..3, SHMOE_MEGA_SCHEDULE_AUTO..SHMOE_MEGA_SCHEDULE_SOLO)");
  }
  c.schedule = static_cast<MegaSchedule>(schedule);  // the enums share their values
  return c;
}

MegaMoEConfig checked_mega_config(const shmoe_mega_moe_config_t* config, int n_pes,
                                  const char* fn) {
  const MegaMoEConfig c = mega_config_of(config, fn);
  if (n_pes < 1)
    throw Refused(std::string(fn) + ": n_pes=" + std::to_string(n_pes) + " is not >= 1");
  MegaConfigNames names;  // the C names already, but for the workers' two fields
  names.matrix_workers = "matrix_workers";
  names.vector_workers = "vector_workers";
  if (const std::string e = config_error(c, n_pes, names); !e.empty())
    throw Refused(std::string(fn) + ": " + e);
  return c;
}

}  // namespace shmoe::moe::c_api

extern "C" {

const char* shmoe_moe_last_error(void) {
  return shmoe_last_error();
}

int shmoe_mega_moe_config_check(const shmoe_mega_moe_config_t* config, int n_pes) {
  return shmoe::moe::c_api::guarded([&] {
    shmoe::moe::c_api::checked_mega_config(config, n_pes, "shmoe_mega_moe_config_check");
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_moe_config_check(const shmoe_moe_config_t* config, int n_pes) {
  return shmoe::moe::c_api::guarded([&] {
    shmoe::moe::c_api::checked_moe_config(config, n_pes, "shmoe_moe_config_check");
    return int{SHMOE_MOE_OK};
  });
}

}  // extern "C"
