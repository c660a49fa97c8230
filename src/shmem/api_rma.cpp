// Remote memory access routines (OpenSHMEM 1.5 section 9.5), and fence/quiet. On the
// shared-memory transport every operation completes before it returns, so each _nbi form is
// its blocking form and quiet only has to order stores; over UCX the _nbi forms are queued and
// quiet waits for them.
#include "shmem/api_stamp.hpp"

namespace {

using shmoe::api::check_remote;

template <typename T>
void put(shmem_ctx_t ctx, T* dest, const T* source, std::size_t nelems, int pe, const char* fn) {
  auto& rt = shmoe::runtime(fn);
  std::size_t off = check_remote(ctx, rt, dest, nelems * sizeof(T), pe, fn, "dest");
  rt.transport().put(pe, off, source, nelems * sizeof(T));
}

template <typename T>
void put_nbi(shmem_ctx_t ctx, T* dest, const T* source, std::size_t nelems, int pe,
             const char* fn) {
  auto& rt = shmoe::runtime(fn);
  std::size_t off = check_remote(ctx, rt, dest, nelems * sizeof(T), pe, fn, "dest");
  rt.transport().put_nbi(pe, off, source, nelems * sizeof(T));
}

template <typename T>
void get(shmem_ctx_t ctx, T* dest, const T* source, std::size_t nelems, int pe, const char* fn) {
  auto& rt = shmoe::runtime(fn);
  std::size_t off = check_remote(ctx, rt, source, nelems * sizeof(T), pe, fn, "source");
  rt.transport().get(pe, off, dest, nelems * sizeof(T));
}

template <typename T>
void get_nbi(shmem_ctx_t ctx, T* dest, const T* source, std::size_t nelems, int pe,
             const char* fn) {
  auto& rt = shmoe::runtime(fn);
  std::size_t off = check_remote(ctx, rt, source, nelems * sizeof(T), pe, fn, "source");
  rt.transport().get_nbi(pe, off, dest, nelems * sizeof(T));
}

// Single elements go as one atomic store/load where the width allows, so a peer polling the word
// with wait_until never sees a torn value.
template <typename T>
void p(shmem_ctx_t ctx, T* dest, T value, int pe, const char* fn) {
  auto& rt = shmoe::runtime(fn);
  std::size_t off = check_remote(ctx, rt, dest, sizeof(T), pe, fn, "dest");
  if constexpr (sizeof(T) <= 8) {
    rt.transport().atomic(pe, off,
                          {shmoe::transport::AmoOp::kStore, sizeof(T), shmoe::api::to_bits(value)});
  } else {
    rt.transport().put(pe, off, &value, sizeof(T));
  }
}

template <typename T>
T g(shmem_ctx_t ctx, const T* source, int pe, const char* fn) {
  auto& rt = shmoe::runtime(fn);
  std::size_t off = check_remote(ctx, rt, source, sizeof(T), pe, fn, "source");
  if constexpr (sizeof(T) <= 8) {
    return shmoe::api::from_bits<T>(
        rt.transport().atomic(pe, off, {shmoe::transport::AmoOp::kLoad, sizeof(T)}));
  } else {
    T value;
    rt.transport().get(pe, off, &value, sizeof(T));
    return value;
  }
}

// Strides are in elements; the whole span touched on the remote side must be symmetric.
inline void check_stride(ptrdiff_t stride, const char* fn, const char* param) {
  if (stride < 1)
    shmoe::api_error(fn, "{}={} must be a positive stride (in elements)", param, stride);
}

template <typename T>
void iput(shmem_ctx_t ctx, T* dest, const T* source, ptrdiff_t dst, ptrdiff_t sst,
          std::size_t nelems, int pe, const char* fn) {
  if (nelems == 0) return;
  check_stride(dst, fn, "dst");
  check_stride(sst, fn, "sst");
  auto& rt = shmoe::runtime(fn);
  std::size_t span = ((nelems - 1) * static_cast<std::size_t>(dst) + 1) * sizeof(T);
  std::size_t off = check_remote(ctx, rt, dest, span, pe, fn, "dest");
  for (std::size_t i = 0; i < nelems; ++i) {
    rt.transport().put(pe, off + i * dst * sizeof(T), source + i * sst, sizeof(T));
  }
}

template <typename T>
void iget(shmem_ctx_t ctx, T* dest, const T* source, ptrdiff_t dst, ptrdiff_t sst,
          std::size_t nelems, int pe, const char* fn) {
  if (nelems == 0) return;
  check_stride(dst, fn, "dst");
  check_stride(sst, fn, "sst");
  auto& rt = shmoe::runtime(fn);
  std::size_t span = ((nelems - 1) * static_cast<std::size_t>(sst) + 1) * sizeof(T);
  std::size_t off = check_remote(ctx, rt, source, span, pe, fn, "source");
  for (std::size_t i = 0; i < nelems; ++i) {
    rt.transport().get(pe, off + i * sst * sizeof(T), dest + i * dst, sizeof(T));
  }
}

}  // namespace

extern "C" {

#define SHMOE_DEF_RMA_TYPED(T, N)                                                          \
  SHMOE_DEFINE_BOTH(void, N##_put, (T * dest, const T* source, size_t nelems, int pe),     \
                    (dest, source, nelems, pe),                                            \
                    put(ctx, dest, source, nelems, pe, "shmem_" #N "_put"))                \
  SHMOE_DEFINE_BOTH(void, N##_put_nbi, (T * dest, const T* source, size_t nelems, int pe), \
                    (dest, source, nelems, pe),                                            \
                    put_nbi(ctx, dest, source, nelems, pe, "shmem_" #N "_put_nbi"))        \
  SHMOE_DEFINE_BOTH(void, N##_get, (T * dest, const T* source, size_t nelems, int pe),     \
                    (dest, source, nelems, pe),                                            \
                    get(ctx, dest, source, nelems, pe, "shmem_" #N "_get"))                \
  SHMOE_DEFINE_BOTH(void, N##_get_nbi, (T * dest, const T* source, size_t nelems, int pe), \
                    (dest, source, nelems, pe),                                            \
                    get_nbi(ctx, dest, source, nelems, pe, "shmem_" #N "_get_nbi"))        \
  SHMOE_DEFINE_BOTH(void, N##_p, (T * dest, T value, int pe), (dest, value, pe),           \
                    p(ctx, dest, value, pe, "shmem_" #N "_p"))                             \
  SHMOE_DEFINE_BOTH(T, N##_g, (const T* source, int pe), (source, pe),                     \
                    g(ctx, source, pe, "shmem_" #N "_g"))                                  \
  SHMOE_DEFINE_BOTH(                                                                       \
      void, N##_iput,                                                                      \
      (T * dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe),    \
      (dest, source, dst, sst, nelems, pe),                                                \
      iput(ctx, dest, source, dst, sst, nelems, pe, "shmem_" #N "_iput"))                  \
  SHMOE_DEFINE_BOTH(                                                                       \
      void, N##_iget,                                                                      \
      (T * dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe),    \
      (dest, source, dst, sst, nelems, pe),                                                \
      iget(ctx, dest, source, dst, sst, nelems, pe, "shmem_" #N "_iget"))
SHMOE_RMA_TYPES(SHMOE_DEF_RMA_TYPED)

#define SHMOE_DEF_RMA_SIZED(BITS, T)                                                               \
  SHMOE_DEFINE_BOTH(void, put##BITS, (void* dest, const void* source, size_t nelems, int pe),      \
                    (dest, source, nelems, pe),                                                    \
                    put(ctx, static_cast<T*>(dest), static_cast<const T*>(source), nelems, pe,     \
                        "shmem_put" #BITS))                                                        \
  SHMOE_DEFINE_BOTH(void, put##BITS##_nbi,                                                         \
                    (void* dest, const void* source, size_t nelems, int pe),                       \
                    (dest, source, nelems, pe),                                                    \
                    put_nbi(ctx, static_cast<T*>(dest), static_cast<const T*>(source), nelems, pe, \
                            "shmem_put" #BITS "_nbi"))                                             \
  SHMOE_DEFINE_BOTH(void, get##BITS, (void* dest, const void* source, size_t nelems, int pe),      \
                    (dest, source, nelems, pe),                                                    \
                    get(ctx, static_cast<T*>(dest), static_cast<const T*>(source), nelems, pe,     \
                        "shmem_get" #BITS))                                                        \
  SHMOE_DEFINE_BOTH(void, get##BITS##_nbi,                                                         \
                    (void* dest, const void* source, size_t nelems, int pe),                       \
                    (dest, source, nelems, pe),                                                    \
                    get_nbi(ctx, static_cast<T*>(dest), static_cast<const T*>(source), nelems, pe, \
                            "shmem_get" #BITS "_nbi"))                                             \
  SHMOE_DEFINE_BOTH(                                                                               \
      void, iput##BITS,                                                                            \
      (void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe),       \
      (dest, source, dst, sst, nelems, pe),                                                        \
      iput(ctx, static_cast<T*>(dest), static_cast<const T*>(source), dst, sst, nelems, pe,        \
           "shmem_iput" #BITS))                                                                    \
  SHMOE_DEFINE_BOTH(                                                                               \
      void, iget##BITS,                                                                            \
      (void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe),       \
      (dest, source, dst, sst, nelems, pe),                                                        \
      iget(ctx, static_cast<T*>(dest), static_cast<const T*>(source), dst, sst, nelems, pe,        \
           "shmem_iget" #BITS))
SHMOE_RMA_SIZES(SHMOE_DEF_RMA_SIZED)

SHMOE_DEFINE_BOTH(void, putmem, (void* dest, const void* source, size_t nelems, int pe),
                  (dest, source, nelems, pe),
                  put(ctx, static_cast<char*>(dest), static_cast<const char*>(source), nelems, pe,
                      "shmem_putmem"))
SHMOE_DEFINE_BOTH(void, putmem_nbi, (void* dest, const void* source, size_t nelems, int pe),
                  (dest, source, nelems, pe),
                  put_nbi(ctx, static_cast<char*>(dest), static_cast<const char*>(source), nelems,
                          pe, "shmem_putmem_nbi"))
SHMOE_DEFINE_BOTH(void, getmem, (void* dest, const void* source, size_t nelems, int pe),
                  (dest, source, nelems, pe),
                  get(ctx, static_cast<char*>(dest), static_cast<const char*>(source), nelems, pe,
                      "shmem_getmem"))
SHMOE_DEFINE_BOTH(void, getmem_nbi, (void* dest, const void* source, size_t nelems, int pe),
                  (dest, source, nelems, pe),
                  get_nbi(ctx, static_cast<char*>(dest), static_cast<const char*>(source), nelems,
                          pe, "shmem_getmem_nbi"))

void shmem_ctx_fence(shmem_ctx_t ctx) {
  shmoe::check_ctx(ctx, "shmem_ctx_fence");
  shmoe::runtime("shmem_ctx_fence").transport().fence();
}
void shmem_ctx_quiet(shmem_ctx_t ctx) {
  shmoe::check_ctx(ctx, "shmem_ctx_quiet");
  shmoe::runtime("shmem_ctx_quiet").transport().quiet();
}
void shmem_fence(void) {
  shmem_ctx_fence(SHMEM_CTX_DEFAULT);
}
void shmem_quiet(void) {
  shmem_ctx_quiet(SHMEM_CTX_DEFAULT);
}

}  // extern "C"
