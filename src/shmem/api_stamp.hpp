// Helpers for defining the typed API families from the type tables in shmoe/type_tables.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "shmem/runtime.hpp"

#define SHMOE_UNPAREN(...) __VA_ARGS__

// Defines shmem_ctx_NAME(ctx, PARAMS) as CALL and shmem_NAME(PARAMS) on the default context.
#define SHMOE_DEFINE_BOTH(RET, NAME, PARAMS, ARGS, CALL)            \
  RET shmem_ctx_##NAME(shmem_ctx_t ctx, SHMOE_UNPAREN PARAMS) {     \
    return CALL;                                                    \
  }                                                                 \
  RET shmem_##NAME(SHMOE_UNPAREN PARAMS) {                          \
    return shmem_ctx_##NAME(SHMEM_CTX_DEFAULT, SHMOE_UNPAREN ARGS); \
  }

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

// The checks every remote operation makes: live context, PE in range, symmetric target.
// Translates `pe` from the context's team numbering to the world's. Returns the target's offset.
inline std::size_t check_remote(shmem_ctx_t ctx, const Runtime& rt, const void* target,
                                std::size_t bytes, int& pe, const char* fn, const char* param) {
  check_ctx(ctx, fn);
  if (ctx->pe_count >= 0) {
    if (pe < 0 || pe >= ctx->pe_count) [[unlikely]] {
      api_error(fn, "pe={} is out of range for the context's team (0..{})", pe, ctx->pe_count - 1);
    }
    pe = ctx->pe_start + pe * ctx->pe_stride;
  } else {
    check_pe(rt, pe, fn);
  }
  return symmetric_offset(rt, target, bytes, fn, param);
}

// Waits until *ivar satisfies cmp against value (backing off, reporting hangs); returns what it
// saw. The signal routines wait on their uint64_t words through this.
std::uint64_t wait_until_u64(const char* fn, std::uint64_t* ivar, int cmp, std::uint64_t value);

}  // namespace shmoe::api
