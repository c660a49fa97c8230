// The C API of shmoe/deep_ep.h's low-latency mode over deep_ep::LowLatencyBuffer.
#include "deep_ep/c_api_guard.hpp"
#include "deep_ep/low_latency_buffer.hpp"
#include "moe/c_api_guard.hpp"
#include "shmoe/deep_ep.h"
#include "shmoe/runtime.hpp"

struct shmoe_low_latency_buffer {
  shmoe::deep_ep::LowLatencyBuffer impl;
};

namespace {

using shmoe::moe::c_api::read_struct;
using shmoe::moe::c_api::require;

constexpr std::size_t kConfigFirst = SHMOE_FIRST_SIZE(shmoe_low_latency_buffer_config_t, reserved);
constexpr std::size_t kDispatchFirst = SHMOE_FIRST_SIZE(shmoe_low_latency_dispatch_args_t, refusal);
constexpr std::size_t kCombineFirst = SHMOE_FIRST_SIZE(shmoe_low_latency_combine_args_t, refusal);

using shmoe::deep_ep::guarded;

}  // namespace

extern "C" {

int shmoe_low_latency_buffer_create(const shmoe_low_latency_buffer_config_t* config,
                                    shmoe_low_latency_buffer_t* buffer) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_low_latency_buffer_create";
    const auto c = read_struct(config, kConfigFirst, fn, "config");
    auto& handle = require(buffer, fn, "buffer");
    handle = new shmoe_low_latency_buffer{shmoe::deep_ep::LowLatencyBuffer(c)};
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_low_latency_buffer_destroy(shmoe_low_latency_buffer_t buffer) {
  return guarded([&] {
    delete buffer;
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_low_latency_buffer_abandon(shmoe_low_latency_buffer_t buffer) {
  return guarded([&] {
    if (buffer != nullptr) buffer->impl.abandon();
    delete buffer;
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_low_latency_buffer_result_counts(shmoe_low_latency_buffer_t buffer, int64_t* in_blocks,
                                           int64_t* copied) {
  return guarded([&] {
    require(buffer, "shmoe_low_latency_buffer_result_counts", "buffer")
        .impl.counts()
        .report(in_blocks, copied);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_low_latency_dispatch(shmoe_low_latency_buffer_t buffer,
                               const shmoe_low_latency_dispatch_args_t* args,
                               shmoe_ep_result_t* result) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_low_latency_dispatch";
    auto& b = require(buffer, fn, "buffer").impl;
    const auto a = read_struct(args, kDispatchFirst, fn, "args");
    require(result, fn, "result") = b.dispatch(a);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_low_latency_combine(shmoe_low_latency_buffer_t buffer,
                              const shmoe_low_latency_combine_args_t* args,
                              shmoe_ep_result_t* result) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_low_latency_combine";
    auto& b = require(buffer, fn, "buffer").impl;
    const auto a = read_struct(args, kCombineFirst, fn, "args");
    require(result, fn, "result") = b.combine(a);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_low_latency_get_next_combine_buffer(shmoe_low_latency_buffer_t buffer,
                                              shmoe_ep_result_t handle,
                                              shmoe_tensor_t* combine_buffer) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_low_latency_get_next_combine_buffer";
    auto& b = require(buffer, fn, "buffer").impl;
    require(combine_buffer, fn, "combine_buffer") = b.next_combine_buffer(handle);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_low_latency_clean(shmoe_low_latency_buffer_t buffer, int num_max_dispatch_tokens_per_rank,
                            int hidden, int num_experts, const char* refusal) {
  return guarded([&] {
    auto& b = require(buffer, "shmoe_low_latency_clean", "buffer").impl;
    b.clean(num_max_dispatch_tokens_per_rank, hidden, num_experts, refusal);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_low_latency_shrink_timeout_ms(const char* text, int* ms) {
  return guarded([&] {
    require(ms, "shmoe_low_latency_shrink_timeout_ms", "ms") =
        shmoe::deep_ep::shrink_timeout_ms(text);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_low_latency_update_mask(shmoe_low_latency_buffer_t buffer, int rank_to_mask, int mask) {
  return guarded([&] {
    require(buffer, "shmoe_low_latency_update_mask", "buffer")
        .impl.update_mask(rank_to_mask, mask != 0);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_low_latency_query_mask(shmoe_low_latency_buffer_t buffer, shmoe_tensor_t mask_status) {
  return guarded([&] {
    require(buffer, "shmoe_low_latency_query_mask", "buffer").impl.query_mask(mask_status);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_low_latency_clean_mask(shmoe_low_latency_buffer_t buffer) {
  return guarded([&] {
    require(buffer, "shmoe_low_latency_clean_mask", "buffer").impl.clean_mask();
    return int{SHMOE_MOE_OK};
  });
}

}  // extern "C"
