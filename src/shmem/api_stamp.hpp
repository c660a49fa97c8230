// Helpers for defining the typed API families from the type tables in shmoe/type_tables.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "shmem/agreement.hpp"
#include "shmem/profiling.hpp"
#include "shmem/runtime.hpp"

#define SHMOE_UNPAREN(...) __VA_ARGS__

// Defines pshmem_ctx_NAME(ctx, PARAMS) as CALL and pshmem_NAME(PARAMS) on the default context,
// with shmem_ctx_NAME and shmem_NAME their weak aliases (profiling.hpp).
#define SHMOE_DEFINE_BOTH(RET, NAME, PARAMS, ARGS, CALL)             \
  RET pshmem_ctx_##NAME(shmem_ctx_t ctx, SHMOE_UNPAREN PARAMS) {     \
    return CALL;                                                     \
  }                                                                  \
  RET pshmem_##NAME(SHMOE_UNPAREN PARAMS) {                          \
    return pshmem_ctx_##NAME(SHMEM_CTX_DEFAULT, SHMOE_UNPAREN ARGS); \
  }                                                                  \
  SHMOE_WEAK_ALIAS(shmem_ctx_##NAME)                                 \
  SHMOE_WEAK_ALIAS(shmem_##NAME)

namespace shmoe::api {

// Values of atomics travel as bit patterns (see transport.hpp).
template <typename T>
std::uint64_t to_bits(T value) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

template <typename T>
T from_bits(std::uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

// The checks every remote operation makes on its context and PE. Returns the PE in the world's
// numbering (a context made on a team takes team PE numbers).
inline int check_ctx_and_pe(shmem_ctx_t ctx, const Runtime& rt, int pe, const char* fn) {
  check_ctx(ctx, fn);
  if (ctx->pe_count >= 0) {
    if (pe < 0 || pe >= ctx->pe_count) [[unlikely]] {
      api_error(fn, "pe={} is out of range for the context's team (0..{})", pe, ctx->pe_count - 1);
    }
    return ctx->pe_start + pe * ctx->pe_stride;
  }
  check_pe(rt, pe, fn);
  return pe;
}

// The checks of a remote operation on one object: context, PE, symmetric target. Translates
// `pe` to the world's numbering. Returns the target's offset.
inline std::size_t check_remote(shmem_ctx_t ctx, const Runtime& rt, const void* target,
                                std::size_t bytes, int& pe, const char* fn, const char* param) {
  pe = check_ctx_and_pe(ctx, rt, pe, fn);
  return symmetric_offset(rt, target, bytes, fn, param);
}

// The local side of a transfer: the buffer and the name of its parameter.
struct LocalBuffer {
  const void* address;
  const char* param;
};

// The context's channel in the PE's transport (nullptr: the default context's).
inline transport::Channel* channel_of(shmem_ctx_t ctx) {
  return ctx->channel.get();
}

// A transfer of `bytes` to or from `target` on `pe`: checks the context, the PE, that the
// target is symmetric and that the local buffer is not null, then calls move(transport,
// channel, world_pe, target_offset). A zero-length transfer moves nothing, and its addresses may be
// null (OpenSHMEM 1.5 Annex C: a null pointer with a zero length is supported), so it checks only
// the context and the PE. Returns the PE in the world's numbering.
template <typename Move>
int transfer(shmem_ctx_t ctx, const void* target, const char* param, LocalBuffer local,
             std::size_t bytes, int pe, const char* fn, Move&& move) {
  auto& rt = runtime(fn);
  pe = check_ctx_and_pe(ctx, rt, pe, fn);
  if (bytes == 0) return pe;
  if (local.address == nullptr) [[unlikely]] {
    api_error(fn, "{}=NULL, but the call moves {} bytes: only a zero-length call may pass NULL",
              local.param, bytes);
  }
  const std::size_t offset = symmetric_offset(rt, target, bytes, fn, param);
  if (rt.config().debug_allocations) [[unlikely]] {
    check_within_allocation(rt, target, bytes, fn, param);
  }
  move(rt.transport(), channel_of(ctx), pe, offset);
  return pe;
}

// Waits until *ivar satisfies cmp against value (backing off, reporting hangs); returns what it
// saw. The signal routines wait on their uint64_t words through this.
std::uint64_t wait_until_u64(const char* fn, std::uint64_t* ivar, int cmp, std::uint64_t value);

}  // namespace shmoe::api
