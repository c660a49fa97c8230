// The C API of shmoe/deep_ep.h over deep_ep::IntranodeBuffer and deep_ep::Result.
#include <string>

#include "deep_ep/c_api_guard.hpp"
#include "deep_ep/intranode_buffer.hpp"
#include "moe/c_api_guard.hpp"
#include "shmoe/deep_ep.h"
#include "shmoe/runtime.hpp"

struct shmoe_intranode_buffer {
  shmoe::deep_ep::IntranodeBuffer impl;
};

namespace {

using shmoe::deep_ep::guarded;

using shmoe::moe::c_api::read_struct;
using shmoe::moe::c_api::require;

constexpr std::size_t kConfigFirst =
    SHMOE_FIRST_SIZE(shmoe_intranode_buffer_config_t, num_max_tokens_per_rank);
constexpr std::size_t kLayoutFirst = SHMOE_FIRST_SIZE(shmoe_intranode_layout_args_t, refusal);
constexpr std::size_t kDispatchFirst = SHMOE_FIRST_SIZE(shmoe_intranode_dispatch_args_t, refusal);
constexpr std::size_t kCombineFirst = SHMOE_FIRST_SIZE(shmoe_intranode_combine_args_t, refusal);

}  // namespace

extern "C" {

int shmoe_intranode_buffer_create(const shmoe_intranode_buffer_config_t* config,
                                  shmoe_intranode_buffer_t* buffer) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_intranode_buffer_create";
    const auto c = read_struct(config, kConfigFirst, fn, "config");
    auto& handle = require(buffer, fn, "buffer");
    handle = new shmoe_intranode_buffer{shmoe::deep_ep::IntranodeBuffer(c)};
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_intranode_buffer_destroy(shmoe_intranode_buffer_t buffer) {
  return guarded([&] {
    delete buffer;
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_intranode_buffer_abandon(shmoe_intranode_buffer_t buffer) {
  return guarded([&] {
    if (buffer != nullptr) buffer->impl.abandon();
    delete buffer;
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_intranode_buffer_result_counts(shmoe_intranode_buffer_t buffer, int64_t* in_blocks,
                                         int64_t* copied) {
  return guarded([&] {
    require(buffer, "shmoe_intranode_buffer_result_counts", "buffer")
        .impl.counts()
        .report(in_blocks, copied);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_intranode_get_dispatch_layout(shmoe_intranode_buffer_t buffer,
                                        const shmoe_intranode_layout_args_t* args,
                                        shmoe_ep_result_t* result) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_intranode_get_dispatch_layout";
    const auto& b = require(buffer, fn, "buffer").impl;
    const auto a = read_struct(args, kLayoutFirst, fn, "args");
    require(result, fn, "result") = b.get_dispatch_layout(a);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_intranode_dispatch(shmoe_intranode_buffer_t buffer,
                             const shmoe_intranode_dispatch_args_t* args,
                             shmoe_ep_result_t* result) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_intranode_dispatch";
    auto& b = require(buffer, fn, "buffer").impl;
    const auto a = read_struct(args, kDispatchFirst, fn, "args");
    require(result, fn, "result") = b.dispatch(a);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_intranode_combine(shmoe_intranode_buffer_t buffer,
                            const shmoe_intranode_combine_args_t* args, shmoe_ep_result_t* result) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_intranode_combine";
    auto& b = require(buffer, fn, "buffer").impl;
    const auto a = read_struct(args, kCombineFirst, fn, "args");
    require(result, fn, "result") = b.combine(a);
    return int{SHMOE_MOE_OK};
  });
}

}  // extern "C"
