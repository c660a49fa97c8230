// Remote memory access routines (OpenSHMEM 1.5 section 9.5), and fence/quiet. On the
// shared-memory transport every operation completes before it returns, so each _nbi form is
// its blocking form and quiet only has to order stores; over UCX the _nbi forms are queued and
// quiet waits for them.
#include <vector>

#include "shmem/api_stamp.hpp"

namespace {

using shmoe::api::channel_of;
using shmoe::api::check_remote;
using shmoe::api::transfer;
using shmoe::transport::Channel;
using shmoe::transport::Transport;

template <typename T>
void put(shmem_ctx_t ctx, T* dest, const T* source, std::size_t nelems, int pe, const char* fn) {
  const std::size_t bytes = shmoe::checked_bytes(fn, "nelems", nelems, sizeof(T));
  transfer(ctx, dest, "dest", {source, "source"}, bytes, pe, fn,
           [&](Transport& t, Channel* ch, int world_pe, std::size_t off) {
             t.put(ch, world_pe, off, source, bytes);
           });
}

template <typename T>
void put_nbi(shmem_ctx_t ctx, T* dest, const T* source, std::size_t nelems, int pe,
             const char* fn) {
  const std::size_t bytes = shmoe::checked_bytes(fn, "nelems", nelems, sizeof(T));
  transfer(ctx, dest, "dest", {source, "source"}, bytes, pe, fn,
           [&](Transport& t, Channel* ch, int world_pe, std::size_t off) {
             t.put_nbi(ch, world_pe, off, source, bytes);
           });
}

template <typename T>
void get(shmem_ctx_t ctx, T* dest, const T* source, std::size_t nelems, int pe, const char* fn) {
  const std::size_t bytes = shmoe::checked_bytes(fn, "nelems", nelems, sizeof(T));
  transfer(ctx, source, "source", {dest, "dest"}, bytes, pe, fn,
           [&](Transport& t, Channel* ch, int world_pe, std::size_t off) {
             t.get(ch, world_pe, off, dest, bytes);
           });
}

template <typename T>
void get_nbi(shmem_ctx_t ctx, T* dest, const T* source, std::size_t nelems, int pe,
             const char* fn) {
  const std::size_t bytes = shmoe::checked_bytes(fn, "nelems", nelems, sizeof(T));
  transfer(ctx, source, "source", {dest, "dest"}, bytes, pe, fn,
           [&](Transport& t, Channel* ch, int world_pe, std::size_t off) {
             t.get_nbi(ch, world_pe, off, dest, bytes);
           });
}

// Single elements go as one store/load where the width allows, so a peer polling the word with
// wait_until never sees a torn value. shmem_p does not wait for the target (quiet completes it).
template <typename T>
void p(shmem_ctx_t ctx, T* dest, T value, int pe, const char* fn) {
  auto& rt = shmoe::runtime(fn);
  std::size_t off = check_remote(ctx, rt, dest, sizeof(T), pe, fn, "dest");
  if constexpr (sizeof(T) <= 8) {
    rt.transport().put_value(channel_of(ctx), pe, off, shmoe::api::to_bits(value), sizeof(T));
  } else {
    rt.transport().put(channel_of(ctx), pe, off, &value, sizeof(T));
  }
}

template <typename T>
T g(shmem_ctx_t ctx, const T* source, int pe, const char* fn) {
  auto& rt = shmoe::runtime(fn);
  std::size_t off = check_remote(ctx, rt, source, sizeof(T), pe, fn, "source");
  if constexpr (sizeof(T) <= 8) {
    return shmoe::api::from_bits<T>(rt.transport().fetch_atomic(
        channel_of(ctx), pe, off, {shmoe::transport::AmoOp::kLoad, sizeof(T)}));
  } else {
    T value;
    rt.transport().get(channel_of(ctx), pe, off, &value, sizeof(T));
    return value;
  }
}

// A strided transfer of blocks (shmem_ibput/ibget; iput/iget are its blocks of one element).
// Strides and block size are in elements; each stride is at least the block, so blocks never
// overlap on either side, and the whole span touched on the remote side must be symmetric.
struct BlockShape {
  ptrdiff_t dst;
  ptrdiff_t sst;
  std::size_t bsize;
  std::size_t nblocks;
  const char* nblocks_name = "nblocks";  // "nelems" for iput and iget, whose blocks are elements
};

inline void check_block_stride(ptrdiff_t stride, std::size_t bsize, const char* fn,
                               const char* param) {
  if (stride < 1 || static_cast<std::size_t>(stride) < bsize) {
    shmoe::api_error(
        fn, "{}={} is not a valid stride: it must be at least {} (elements, the block size)", param,
        stride, std::max<std::size_t>(bsize, 1));
  }
}

// Bytes from the first to the last element of the blocks on the side whose stride is given (0
// when nothing moves).
template <typename T>
std::size_t block_span(const BlockShape& shape, ptrdiff_t stride, const char* fn) {
  if (shape.bsize == 0 || shape.nblocks == 0) return 0;
  // The span must fit in size_t: a wrapped one would pass every later check.
  constexpr std::size_t kMaxElements = SIZE_MAX / sizeof(T);
  if (shape.bsize > kMaxElements) {
    shmoe::api_error(fn, "bsize={} is out of range (0..{} elements of {} bytes)", shape.bsize,
                     kMaxElements, sizeof(T));
  }
  const std::size_t step = static_cast<std::size_t>(stride);
  const std::size_t max_blocks = (kMaxElements - shape.bsize) / step + 1;
  if (shape.nblocks > max_blocks) {
    shmoe::api_error(fn,
                     "{}={} is out of range (0..{}: blocks of {} elements every {} elements of {} "
                     "bytes must span no more than the address space)",
                     shape.nblocks_name, shape.nblocks, max_blocks, shape.bsize, step, sizeof(T));
  }
  return ((shape.nblocks - 1) * step + shape.bsize) * sizeof(T);
}

template <typename T>
shmoe::transport::Blocks checked_blocks(const BlockShape& shape, bool remote_is_dest,
                                        const char* fn) {
  if (shape.bsize == 0 || shape.nblocks == 0) return {};
  check_block_stride(shape.dst, shape.bsize, fn, "dst");
  check_block_stride(shape.sst, shape.bsize, fn, "sst");
  const std::size_t dst_bytes = static_cast<std::size_t>(shape.dst) * sizeof(T);
  const std::size_t sst_bytes = static_cast<std::size_t>(shape.sst) * sizeof(T);
  return {shape.bsize * sizeof(T), shape.nblocks, remote_is_dest ? dst_bytes : sst_bytes,
          remote_is_dest ? sst_bytes : dst_bytes};
}

template <typename T>
void ibput(shmem_ctx_t ctx, T* dest, const T* source, const BlockShape& shape, int pe,
           const char* fn) {
  const auto blocks = checked_blocks<T>(shape, true, fn);
  transfer(ctx, dest, "dest", {source, "source"}, block_span<T>(shape, shape.dst, fn), pe, fn,
           [&](Transport& t, Channel* ch, int world_pe, std::size_t off) {
             t.put_blocks(ch, world_pe, off, source, blocks);
           });
}

template <typename T>
void ibget(shmem_ctx_t ctx, T* dest, const T* source, const BlockShape& shape, int pe,
           const char* fn) {
  const auto blocks = checked_blocks<T>(shape, false, fn);
  transfer(ctx, source, "source", {dest, "dest"}, block_span<T>(shape, shape.sst, fn), pe, fn,
           [&](Transport& t, Channel* ch, int world_pe, std::size_t off) {
             t.get_blocks(ch, world_pe, off, dest, blocks);
           });
}

void pe_quiet(shmem_ctx_t ctx, const int* target_pes, size_t npes, const char* fn) {
  if (ctx == SHMEM_CTX_INVALID || npes == 0) return;
  shmoe::check_ctx(ctx, fn);
  if (target_pes == nullptr) shmoe::api_error(fn, "target_pes=NULL with npes={}", npes);
  shmem_team_t team = SHMEM_TEAM_INVALID;
  pshmem_ctx_get_team(ctx, &team);
  const int size = pshmem_team_n_pes(team);
  shmoe::checked_bytes(fn, "npes", npes, sizeof(int));  // the array must fit in memory
  // Each PE once: what is quieted is bounded by the team, not by npes (which may repeat PEs).
  std::vector<bool> named(static_cast<std::size_t>(size), false);
  std::vector<int> world;
  for (size_t i = 0; i < npes; ++i) {
    if (target_pes[i] < 0 || target_pes[i] >= size) {
      shmoe::api_error(fn,
                       "target_pes[{}]={} is out of range (0..{}, the PEs of the context's team)",
                       i, target_pes[i], size - 1);
    }
    if (named[target_pes[i]]) continue;
    named[target_pes[i]] = true;
    world.push_back(pshmem_team_translate_pe(team, target_pes[i], SHMEM_TEAM_WORLD));
  }
  shmoe::runtime(fn).transport().quiet_pes(channel_of(ctx), world.data(), world.size());
}

}  // namespace

extern "C" {

#define SHMOE_DEF_RMA_TYPED(T, N)                                                             \
  SHMOE_DEFINE_BOTH(void, N##_put, (T * dest, const T* source, size_t nelems, int pe),        \
                    (dest, source, nelems, pe),                                               \
                    put(ctx, dest, source, nelems, pe, "shmem_" #N "_put"))                   \
  SHMOE_DEFINE_BOTH(void, N##_put_nbi, (T * dest, const T* source, size_t nelems, int pe),    \
                    (dest, source, nelems, pe),                                               \
                    put_nbi(ctx, dest, source, nelems, pe, "shmem_" #N "_put_nbi"))           \
  SHMOE_DEFINE_BOTH(void, N##_get, (T * dest, const T* source, size_t nelems, int pe),        \
                    (dest, source, nelems, pe),                                               \
                    get(ctx, dest, source, nelems, pe, "shmem_" #N "_get"))                   \
  SHMOE_DEFINE_BOTH(void, N##_get_nbi, (T * dest, const T* source, size_t nelems, int pe),    \
                    (dest, source, nelems, pe),                                               \
                    get_nbi(ctx, dest, source, nelems, pe, "shmem_" #N "_get_nbi"))           \
  SHMOE_DEFINE_BOTH(void, N##_p, (T * dest, T value, int pe), (dest, value, pe),              \
                    p(ctx, dest, value, pe, "shmem_" #N "_p"))                                \
  SHMOE_DEFINE_BOTH(T, N##_g, (const T* source, int pe), (source, pe),                        \
                    g(ctx, source, pe, "shmem_" #N "_g"))                                     \
  SHMOE_DEFINE_BOTH(                                                                          \
      void, N##_iput,                                                                         \
      (T * dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe),       \
      (dest, source, dst, sst, nelems, pe),                                                   \
      ibput(ctx, dest, source, {dst, sst, 1, nelems, "nelems"}, pe, "shmem_" #N "_iput"))     \
  SHMOE_DEFINE_BOTH(                                                                          \
      void, N##_iget,                                                                         \
      (T * dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe),       \
      (dest, source, dst, sst, nelems, pe),                                                   \
      ibget(ctx, dest, source, {dst, sst, 1, nelems, "nelems"}, pe, "shmem_" #N "_iget"))     \
  SHMOE_DEFINE_BOTH(                                                                          \
      void, N##_ibput,                                                                        \
      (T * dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks, \
       int pe),                                                                               \
      (dest, source, dst, sst, bsize, nblocks, pe),                                           \
      ibput(ctx, dest, source, {dst, sst, bsize, nblocks}, pe, "shmem_" #N "_ibput"))         \
  SHMOE_DEFINE_BOTH(                                                                          \
      void, N##_ibget,                                                                        \
      (T * dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks, \
       int pe),                                                                               \
      (dest, source, dst, sst, bsize, nblocks, pe),                                           \
      ibget(ctx, dest, source, {dst, sst, bsize, nblocks}, pe, "shmem_" #N "_ibget"))
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
      ibput(ctx, static_cast<T*>(dest), static_cast<const T*>(source),                             \
            {dst, sst, 1, nelems, "nelems"}, pe, "shmem_iput" #BITS))                              \
  SHMOE_DEFINE_BOTH(                                                                               \
      void, iget##BITS,                                                                            \
      (void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe),       \
      (dest, source, dst, sst, nelems, pe),                                                        \
      ibget(ctx, static_cast<T*>(dest), static_cast<const T*>(source),                             \
            {dst, sst, 1, nelems, "nelems"}, pe, "shmem_iget" #BITS))                              \
  SHMOE_DEFINE_BOTH(void, ibput##BITS,                                                             \
                    (void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize,   \
                     size_t nblocks, int pe),                                                      \
                    (dest, source, dst, sst, bsize, nblocks, pe),                                  \
                    ibput(ctx, static_cast<T*>(dest), static_cast<const T*>(source),               \
                          {dst, sst, bsize, nblocks}, pe, "shmem_ibput" #BITS))                    \
  SHMOE_DEFINE_BOTH(void, ibget##BITS,                                                             \
                    (void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize,   \
                     size_t nblocks, int pe),                                                      \
                    (dest, source, dst, sst, bsize, nblocks, pe),                                  \
                    ibget(ctx, static_cast<T*>(dest), static_cast<const T*>(source),               \
                          {dst, sst, bsize, nblocks}, pe, "shmem_ibget" #BITS))
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

// A fence or quiet on SHMEM_CTX_INVALID does nothing (OpenSHMEM 1.5 section 9.11); a destroyed
// context is still an error.
void pshmem_ctx_fence(shmem_ctx_t ctx) {
  if (ctx == SHMEM_CTX_INVALID) return;
  shmoe::check_ctx(ctx, "shmem_ctx_fence");
  shmoe::runtime("shmem_ctx_fence").transport().fence(channel_of(ctx));
}
void pshmem_ctx_quiet(shmem_ctx_t ctx) {
  if (ctx == SHMEM_CTX_INVALID) return;
  shmoe::check_ctx(ctx, "shmem_ctx_quiet");
  shmoe::runtime("shmem_ctx_quiet").transport().quiet(channel_of(ctx));
}
// OpenSHMEM 1.6 (9.12.3). PE numbers are those of the context's team (the world for the default
// context). Over UCX only the named PEs' endpoints are flushed; over shared memory, where a quiet
// is one store fence, the whole context is completed.
void pshmem_ctx_pe_quiet(shmem_ctx_t ctx, const int* target_pes, size_t npes) {
  pe_quiet(ctx, target_pes, npes, "shmem_ctx_pe_quiet");
}
void pshmem_pe_quiet(const int* target_pes, size_t npes) {
  pe_quiet(SHMEM_CTX_DEFAULT, target_pes, npes, "shmem_pe_quiet");
}
void pshmem_fence(void) {
  pshmem_ctx_fence(SHMEM_CTX_DEFAULT);
}
void pshmem_quiet(void) {
  pshmem_ctx_quiet(SHMEM_CTX_DEFAULT);
}
SHMOE_WEAK_ALIAS(shmem_ctx_fence)
SHMOE_WEAK_ALIAS(shmem_ctx_quiet)
SHMOE_WEAK_ALIAS(shmem_fence)
SHMOE_WEAK_ALIAS(shmem_quiet)
SHMOE_WEAK_ALIAS(shmem_ctx_pe_quiet)
SHMOE_WEAK_ALIAS(shmem_pe_quiet)

}  // extern "C"
