// The C API of shmoe/elastic_primitives.h over deep_ep's Pp, Agrs and Engram (primitives.hpp).
#include <fmt/format.h>
#include <shmem.h>

#include <string>
#include <vector>

#include "deep_ep/c_api_guard.hpp"
#include "deep_ep/c_handle.hpp"
#include "deep_ep/primitives.hpp"
#include "moe/c_api_guard.hpp"
#include "shmoe/elastic_primitives.h"
#include "shmoe/runtime.hpp"

namespace {

// guarded() for calls that return nothing.
template <typename F>
int guarded(F&& f) {
  return shmoe::deep_ep::guarded([&] {
    f();
    return int{SHMOE_MOE_OK};
  });
}

using shmoe::deep_ep::Agrs;
using shmoe::deep_ep::Engram;
using shmoe::deep_ep::Pp;
using shmoe::deep_ep::primitives_of;
using shmoe::moe::Refused;
using shmoe::moe::c_api::read_struct;
using shmoe::moe::c_api::require;

constexpr std::size_t kEngramWriteFirst =
    SHMOE_FIRST_SIZE(shmoe_elastic_engram_write_args_t, refusal);

shmoe::deep_ep::ElasticBuffer& buffer_of(shmoe_elastic_buffer_t buffer, const char* fn) {
  return require(buffer, fn, "buffer").impl;
}

void require_at_least(const char* fn, const char* name, std::int64_t v, std::int64_t low) {
  if (v < low) throw Refused(fmt::format("{}: {}={} must be at least {}", fn, name, v, low));
}

Pp& pp_of(shmoe_elastic_buffer_t buffer, const char* fn) {
  auto& p = primitives_of(buffer_of(buffer, fn)).pp;
  if (p == nullptr) throw Refused(std::string(fn) + ": PP is not configured (pp_set_config)");
  return *p;
}

Agrs& agrs_of(shmoe_elastic_buffer_t buffer, const char* fn) {
  auto& a = primitives_of(buffer_of(buffer, fn)).agrs;
  if (a == nullptr) {
    throw Refused(std::string(fn) + ": AGRS is not configured (agrs_set_config)");
  }
  return *a;
}

}  // namespace

extern "C" {

int shmoe_elastic_pp_buffer_size_hint(int64_t num_max_tensor_bytes, int num_max_inflight_tensors,
                                      uint64_t* bytes) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_elastic_pp_buffer_size_hint";
    require_at_least(fn, "num_max_tensor_bytes", num_max_tensor_bytes, 1);
    require_at_least(fn, "num_max_inflight_tensors", num_max_inflight_tensors, 1);
    require(bytes, fn, "bytes") = Pp::size_hint(num_max_tensor_bytes, num_max_inflight_tensors);
  });
}

int shmoe_elastic_pp_set_config(shmoe_elastic_buffer_t buffer, int64_t num_max_tensor_bytes,
                                int num_max_inflight_tensors) {
  return guarded([&] {
    shmoe::deep_ep::pp_set_config(buffer_of(buffer, "shmoe_elastic_pp_set_config"),
                                  num_max_tensor_bytes, num_max_inflight_tensors);
  });
}

int shmoe_elastic_pp_send(shmoe_elastic_buffer_t buffer, const shmoe_tensor_t* t, int dst_rank) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_elastic_pp_send";
    pp_of(buffer, fn).send(require(t, fn, "t"), dst_rank);
  });
}

int shmoe_elastic_pp_recv(shmoe_elastic_buffer_t buffer, const shmoe_tensor_t* t, int src_rank) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_elastic_pp_recv";
    pp_of(buffer, fn).recv(require(t, fn, "t"), src_rank);
  });
}

int shmoe_elastic_agrs_session_bytes(int num_ranks, const int64_t* tensor_bytes, int n,
                                     uint64_t* bytes) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_elastic_agrs_session_bytes";
    require_at_least(fn, "num_ranks", num_ranks, 1);
    require_at_least(fn, "n", n, 0);
    if (n > 0) require(tensor_bytes, fn, "tensor_bytes");
    std::uint64_t sum = 0;
    for (int i = 0; i < n; ++i) {
      require_at_least(fn, "tensor_bytes[i]", tensor_bytes[i], 0);
      sum += shmoe::deep_ep::align_to(
          static_cast<std::uint64_t>(tensor_bytes[i]) * static_cast<std::uint64_t>(num_ranks), 32);
    }
    require(bytes, fn, "bytes") = sum;
  });
}

int shmoe_elastic_agrs_buffer_size_hint(uint64_t num_max_session_bytes, uint64_t* bytes) {
  return guarded([&] {
    require(bytes, "shmoe_elastic_agrs_buffer_size_hint", "bytes") =
        shmoe::deep_ep::align_to(num_max_session_bytes, shmoe::deep_ep::kPrimitiveAlignment);
  });
}

int shmoe_elastic_agrs_set_config(shmoe_elastic_buffer_t buffer, int64_t num_max_session_bytes,
                                  int num_max_all_gathers_per_session) {
  return guarded([&] {
    shmoe::deep_ep::agrs_set_config(buffer_of(buffer, "shmoe_elastic_agrs_set_config"),
                                    num_max_session_bytes, num_max_all_gathers_per_session);
  });
}

int shmoe_elastic_agrs_create_session(shmoe_elastic_buffer_t buffer) {
  return guarded([&] { agrs_of(buffer, "ElasticBuffer.create_agrs_session").create_session(); });
}

int shmoe_elastic_agrs_destroy_session(shmoe_elastic_buffer_t buffer) {
  return guarded([&] { agrs_of(buffer, "ElasticBuffer.destroy_agrs_session").destroy_session(); });
}

int shmoe_elastic_agrs_inplace_tensors(shmoe_elastic_buffer_t buffer, const int64_t* tensor_bytes,
                                       int n, void** out) {
  return guarded([&] {
    constexpr const char* fn = "ElasticBuffer.agrs_get_inplace_tensor";
    require_at_least(fn, "the number of shapes", n, 1);
    require(tensor_bytes, fn, "tensor_bytes");
    require(out, fn, "out");
    const auto places =
        agrs_of(buffer, fn).inplace(std::vector<std::int64_t>(tensor_bytes, tensor_bytes + n));
    for (int i = 0; i < n; ++i) out[i] = places[static_cast<std::size_t>(i)];
  });
}

int shmoe_elastic_agrs_all_gather(shmoe_elastic_buffer_t buffer, const shmoe_tensor_t* tensors,
                                  int n, void** gathered, shmoe_elastic_agrs_ticket_t* ticket) {
  return guarded([&] {
    constexpr const char* fn = "ElasticBuffer.all_gather";
    require_at_least(fn, "the number of tensors", n, 1);
    require(tensors, fn, "tensors");
    require(gathered, fn, "gathered");
    auto& out = require(ticket, fn, "ticket");
    out = agrs_of(buffer, fn).all_gather(tensors, n, gathered);
  });
}

int shmoe_elastic_agrs_wait(shmoe_elastic_buffer_t buffer, shmoe_elastic_agrs_ticket_t ticket) {
  return guarded([&] { agrs_of(buffer, "shmoe_elastic_agrs_wait").wait(ticket); });
}

int shmoe_elastic_engram_storage_size_hint(int64_t num_entries, int hidden, int64_t num_max_tokens,
                                           int element_bytes, uint64_t bytes[2]) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_elastic_engram_storage_size_hint";
    require_at_least(fn, "num_entries", num_entries, 0);
    require_at_least(fn, "hidden", hidden, 1);
    require_at_least(fn, "num_max_tokens", num_max_tokens, 0);
    require_at_least(fn, "element_bytes", element_bytes, 1);
    require(bytes, fn, "bytes");
    using shmoe::deep_ep::align_to;
    const std::uint64_t entry = align_to(static_cast<std::uint64_t>(hidden) * element_bytes, 32);
    const auto a = shmoe::deep_ep::kPrimitiveAlignment;
    bytes[0] = align_to(entry * static_cast<std::uint64_t>(num_max_tokens), a);
    bytes[1] = align_to(entry * static_cast<std::uint64_t>(num_entries), a);
  });
}

int shmoe_elastic_engram_write(shmoe_elastic_buffer_t buffer,
                               const shmoe_elastic_engram_write_args_t* args) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_elastic_engram_write";
    auto& b = buffer_of(buffer, fn);
    shmoe::deep_ep::engram_write(b, read_struct(args, kEngramWriteFirst, fn, "args"));
  });
}

int shmoe_elastic_engram_fetch(shmoe_elastic_buffer_t buffer, const shmoe_tensor_t* indices,
                               int use_tma_aligned_col_major_sf, shmoe_ep_result_t* result) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_elastic_engram_fetch";
    const Engram& e = primitives_of(buffer_of(buffer, fn)).engram;
    const shmoe_tensor_t& idx = require(indices, fn, "indices");
    auto& out = require(result, fn, "result");
    out = e.fetch(idx, use_tma_aligned_col_major_sf != 0);
  });
}

int shmoe_elastic_engram_fetch_wait(shmoe_elastic_buffer_t buffer, shmoe_ep_result_t result) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_elastic_engram_fetch_wait";
    buffer_of(buffer, fn);
    require(result, fn, "result");
    shmem_quiet();  // completes this PE's gets from peers on other hosts
  });
}

}  // extern "C"
