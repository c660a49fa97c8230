// Atomic memory operations (OpenSHMEM 1.5 section 9.7). Each is one transport atomic on the
// bit pattern of the value: the fetching ones wait for the old value (the _nbi fetching forms
// store it into `fetch`, complete on return), the others are posted and complete by quiet.
#include "shmem/api_stamp.hpp"

namespace {

using shmoe::transport::AmoOp;

// The checks of every AMO; then `run(transport, channel, world_pe, offset)`.
template <typename T, typename Run>
auto checked_amo(shmem_ctx_t ctx, T* dest, int pe, const char* fn, Run&& run) {
  auto& rt = shmoe::runtime(fn);
  std::size_t off = shmoe::api::check_remote(ctx, rt, dest, sizeof(T), pe, fn, "dest");
  if (reinterpret_cast<std::uintptr_t>(dest) % sizeof(T) != 0) [[unlikely]] {
    shmoe::api_error(fn, "dest={} is not aligned to {} bytes", static_cast<const void*>(dest),
                     sizeof(T));
  }
  return run(rt.transport(), shmoe::api::channel_of(ctx), pe, off);
}

template <typename T>
T amo(shmem_ctx_t ctx, T* dest, AmoOp op, T operand, T compare, int pe, const char* fn) {
  return checked_amo(ctx, dest, pe, fn, [&](auto& t, auto* ch, int world_pe, std::size_t off) {
    return shmoe::api::from_bits<T>(t.fetch_atomic(
        ch, world_pe, off,
        {op, sizeof(T), shmoe::api::to_bits(operand), shmoe::api::to_bits(compare)}));
  });
}

// The non-fetching AMOs (set, inc, add, and, or, xor).
template <typename T>
void post(shmem_ctx_t ctx, T* dest, AmoOp op, T operand, int pe, const char* fn) {
  checked_amo(ctx, dest, pe, fn, [&](auto& t, auto* ch, int world_pe, std::size_t off) {
    t.post_atomic(ch, world_pe, off, {op, sizeof(T), shmoe::api::to_bits(operand)});
  });
}

template <typename T>
void store_fetched(T* fetch, T value, const char* fn) {
  if (fetch == nullptr)
    shmoe::api_error(fn, "fetch=NULL: a fetching atomic needs a result address");
  *fetch = value;
}

}  // namespace

// Multi-word types ("long long") cannot be written T{} inside the macros.
#define Zero(T) \
  std::type_identity_t<T> {}
#define One(T)              \
  std::type_identity_t<T> { \
    1                       \
  }

extern "C" {

#define SHMOE_DEF_AMO_EXTENDED(T, N)                                                               \
  SHMOE_DEFINE_BOTH(T, N##_atomic_fetch, (const T* source, int pe), (source, pe),                  \
                    amo(ctx, const_cast<T*>(source), AmoOp::kLoad, Zero(T), Zero(T), pe,           \
                        "shmem_" #N "_atomic_fetch"))                                              \
  SHMOE_DEFINE_BOTH(void, N##_atomic_set, (T * dest, T value, int pe), (dest, value, pe),          \
                    post(ctx, dest, AmoOp::kStore, value, pe, "shmem_" #N "_atomic_set"))          \
  SHMOE_DEFINE_BOTH(T, N##_atomic_swap, (T * dest, T value, int pe), (dest, value, pe),            \
                    amo(ctx, dest, AmoOp::kSwap, value, Zero(T), pe, "shmem_" #N "_atomic_swap"))  \
  SHMOE_DEFINE_BOTH(void, N##_atomic_fetch_nbi, (T * fetch, const T* source, int pe),              \
                    (fetch, source, pe),                                                           \
                    store_fetched(fetch,                                                           \
                                  amo(ctx, const_cast<T*>(source), AmoOp::kLoad, Zero(T), Zero(T), \
                                      pe, "shmem_" #N "_atomic_fetch_nbi"),                        \
                                  "shmem_" #N "_atomic_fetch_nbi"))                                \
  SHMOE_DEFINE_BOTH(                                                                               \
      void, N##_atomic_swap_nbi, (T * fetch, T * dest, T value, int pe), (fetch, dest, value, pe), \
      store_fetched(                                                                               \
          fetch, amo(ctx, dest, AmoOp::kSwap, value, Zero(T), pe, "shmem_" #N "_atomic_swap_nbi"), \
          "shmem_" #N "_atomic_swap_nbi"))
SHMOE_AMO_EXTENDED_TYPES(SHMOE_DEF_AMO_EXTENDED)

#define SHMOE_DEF_AMO_STANDARD(T, N)                                                             \
  SHMOE_DEFINE_BOTH(                                                                             \
      T, N##_atomic_compare_swap, (T * dest, T cond, T value, int pe), (dest, cond, value, pe),  \
      amo(ctx, dest, AmoOp::kCompareSwap, value, cond, pe, "shmem_" #N "_atomic_compare_swap"))  \
  SHMOE_DEFINE_BOTH(                                                                             \
      T, N##_atomic_fetch_inc, (T * dest, int pe), (dest, pe),                                   \
      amo(ctx, dest, AmoOp::kAdd, One(T), Zero(T), pe, "shmem_" #N "_atomic_fetch_inc"))         \
  SHMOE_DEFINE_BOTH(void, N##_atomic_inc, (T * dest, int pe), (dest, pe),                        \
                    post(ctx, dest, AmoOp::kAdd, One(T), pe, "shmem_" #N "_atomic_inc"))         \
  SHMOE_DEFINE_BOTH(                                                                             \
      T, N##_atomic_fetch_add, (T * dest, T value, int pe), (dest, value, pe),                   \
      amo(ctx, dest, AmoOp::kAdd, value, Zero(T), pe, "shmem_" #N "_atomic_fetch_add"))          \
  SHMOE_DEFINE_BOTH(void, N##_atomic_add, (T * dest, T value, int pe), (dest, value, pe),        \
                    post(ctx, dest, AmoOp::kAdd, value, pe, "shmem_" #N "_atomic_add"))          \
  SHMOE_DEFINE_BOTH(void, N##_atomic_compare_swap_nbi,                                           \
                    (T * fetch, T * dest, T cond, T value, int pe),                              \
                    (fetch, dest, cond, value, pe),                                              \
                    store_fetched(fetch,                                                         \
                                  amo(ctx, dest, AmoOp::kCompareSwap, value, cond, pe,           \
                                      "shmem_" #N "_atomic_compare_swap_nbi"),                   \
                                  "shmem_" #N "_atomic_compare_swap_nbi"))                       \
  SHMOE_DEFINE_BOTH(                                                                             \
      void, N##_atomic_fetch_inc_nbi, (T * fetch, T * dest, int pe), (fetch, dest, pe),          \
      store_fetched(                                                                             \
          fetch,                                                                                 \
          amo(ctx, dest, AmoOp::kAdd, One(T), Zero(T), pe, "shmem_" #N "_atomic_fetch_inc_nbi"), \
          "shmem_" #N "_atomic_fetch_inc_nbi"))                                                  \
  SHMOE_DEFINE_BOTH(void, N##_atomic_fetch_add_nbi, (T * fetch, T * dest, T value, int pe),      \
                    (fetch, dest, value, pe),                                                    \
                    store_fetched(fetch,                                                         \
                                  amo(ctx, dest, AmoOp::kAdd, value, Zero(T), pe,                \
                                      "shmem_" #N "_atomic_fetch_add_nbi"),                      \
                                  "shmem_" #N "_atomic_fetch_add_nbi"))
SHMOE_AMO_STANDARD_TYPES(SHMOE_DEF_AMO_STANDARD)

#define SHMOE_DEF_AMO_BITWISE_OP(T, N, OP, AMO_OP)                                                \
  SHMOE_DEFINE_BOTH(T, N##_atomic_fetch_##OP, (T * dest, T value, int pe), (dest, value, pe),     \
                    amo(ctx, dest, AMO_OP, value, Zero(T), pe, "shmem_" #N "_atomic_fetch_" #OP)) \
  SHMOE_DEFINE_BOTH(void, N##_atomic_##OP, (T * dest, T value, int pe), (dest, value, pe),        \
                    post(ctx, dest, AMO_OP, value, pe, "shmem_" #N "_atomic_" #OP))               \
  SHMOE_DEFINE_BOTH(void, N##_atomic_fetch_##OP##_nbi, (T * fetch, T * dest, T value, int pe),    \
                    (fetch, dest, value, pe),                                                     \
                    store_fetched(fetch,                                                          \
                                  amo(ctx, dest, AMO_OP, value, Zero(T), pe,                      \
                                      "shmem_" #N "_atomic_fetch_" #OP "_nbi"),                   \
                                  "shmem_" #N "_atomic_fetch_" #OP "_nbi"))
#define SHMOE_DEF_AMO_BITWISE(T, N)                \
  SHMOE_DEF_AMO_BITWISE_OP(T, N, and, AmoOp::kAnd) \
  SHMOE_DEF_AMO_BITWISE_OP(T, N, or, AmoOp::kOr)   \
  SHMOE_DEF_AMO_BITWISE_OP(T, N, xor, AmoOp::kXor)
SHMOE_AMO_BITWISE_TYPES(SHMOE_DEF_AMO_BITWISE)

}  // extern "C"
