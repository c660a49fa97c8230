// The C API of shmoe/elastic.h over deep_ep::ElasticBuffer and deep_ep::Result.
#include <cstring>
#include <string>

#include "deep_ep/c_api_guard.hpp"
#include "deep_ep/c_handle.hpp"
#include "moe/c_api_guard.hpp"
#include "shmoe/elastic.h"
#include "shmoe/runtime.hpp"

namespace {

using shmoe::deep_ep::guarded;

using shmoe::moe::c_api::read_struct;
using shmoe::moe::c_api::require;

constexpr std::size_t kConfigFirst = SHMOE_FIRST_SIZE(shmoe_elastic_buffer_config_t, deterministic);
constexpr std::size_t kDispatchFirst = SHMOE_FIRST_SIZE(shmoe_elastic_dispatch_args_t, refusal);
constexpr std::size_t kCombineFirst = SHMOE_FIRST_SIZE(shmoe_elastic_combine_args_t, refusal);

}  // namespace

extern "C" {

int shmoe_ep_result_get(shmoe_ep_result_t result, const char* name, shmoe_tensor_t* out) {
  if (out != nullptr) *out = shmoe_tensor_t{};
  if (result == nullptr || name == nullptr || out == nullptr) return 0;
  const shmoe_tensor_t* t = result->find(name);
  if (t == nullptr) return 0;
  *out = *t;
  return 1;
}

const char* shmoe_ep_result_name(shmoe_ep_result_t result, int i) {
  if (result == nullptr || i < 0) return nullptr;
  const auto& arrays = result->arrays();
  return static_cast<std::size_t>(i) < arrays.size()
             ? arrays[static_cast<std::size_t>(i)].name.c_str()
             : nullptr;
}

void shmoe_ep_result_retain(shmoe_ep_result_t result) {
  if (result != nullptr) result->retain();
}

void shmoe_ep_result_release(shmoe_ep_result_t result) {
  if (result != nullptr && result->release()) delete result;
}

namespace {

// The config and rank count of a static query (size hint, heap size), checked.
shmoe_elastic_buffer_config_t query_config(const shmoe_elastic_buffer_config_t* config,
                                           int num_ranks, const char* fn) {
  const auto c = read_struct(config, kConfigFirst, fn, "config");
  if (num_ranks < 1) {
    throw shmoe::moe::Refused(std::string(fn) + ": num_ranks=" + std::to_string(num_ranks) +
                              " must be at least 1");
  }
  return c;
}

}  // namespace

int shmoe_elastic_buffer_size_hint(const shmoe_elastic_buffer_config_t* config, int num_ranks,
                                   uint64_t* bytes) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_elastic_buffer_size_hint";
    const auto c = query_config(config, num_ranks, fn);
    require(bytes, fn, "bytes") = shmoe::deep_ep::ElasticBuffer::size_hint(c, num_ranks);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_elastic_buffer_heap_size(const shmoe_elastic_buffer_config_t* config, int num_ranks,
                                   uint64_t* bytes) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_elastic_buffer_heap_size";
    const auto c = query_config(config, num_ranks, fn);
    require(bytes, fn, "bytes") = shmoe::deep_ep::ElasticBuffer::heap_bytes(c, num_ranks);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_elastic_buffer_create(const shmoe_elastic_buffer_config_t* config,
                                shmoe_elastic_buffer_t* buffer) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_elastic_buffer_create";
    const auto c = read_struct(config, kConfigFirst, fn, "config");
    auto& handle = require(buffer, fn, "buffer");
    handle = new shmoe_elastic_buffer{shmoe::deep_ep::ElasticBuffer(c)};
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_elastic_buffer_destroy(shmoe_elastic_buffer_t buffer) {
  return guarded([&] {
    delete buffer;
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_elastic_buffer_domain_size(shmoe_elastic_buffer_t buffer, int logical, int sizes[2]) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_elastic_buffer_domain_size";
    const auto& b = require(buffer, fn, "buffer").impl;
    require(sizes, fn, "sizes");
    const bool split = logical ? b.hybrid() : true;
    sizes[0] = split ? b.num_hosts() : 1;
    sizes[1] = split ? b.ranks_per_host() : b.num_ranks();
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_elastic_buffer_result_counts(shmoe_elastic_buffer_t buffer, int64_t* in_blocks,
                                       int64_t* copied) {
  return guarded([&] {
    require(buffer, "shmoe_elastic_buffer_result_counts", "buffer")
        .impl.result_counts()
        .report(in_blocks, copied);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_elastic_dispatch(shmoe_elastic_buffer_t buffer, const shmoe_elastic_dispatch_args_t* args,
                           shmoe_ep_result_t* result) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_elastic_dispatch";
    auto& b = require(buffer, fn, "buffer").impl;
    const auto a = read_struct(args, kDispatchFirst, fn, "args");
    auto& out = require(result, fn, "result");
    out = b.dispatch(a);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_elastic_combine(shmoe_elastic_buffer_t buffer, const shmoe_elastic_combine_args_t* args,
                          shmoe_ep_result_t* result) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_elastic_combine";
    auto& b = require(buffer, fn, "buffer").impl;
    const auto a = read_struct(args, kCombineFirst, fn, "args");
    auto& out = require(result, fn, "result");
    out = b.combine(a);
    return int{SHMOE_MOE_OK};
  });
}

}  // extern "C"
