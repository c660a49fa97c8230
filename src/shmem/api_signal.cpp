// Signaling operations (OpenSHMEM 1.5 section 9.8): data, then the signal, never the reverse;
// each transport keeps that order (transport.hpp), and the _nbi forms do not wait for the target.
#include "common/backoff.hpp"
#include "shmem/api_stamp.hpp"

namespace {

using shmoe::transport::Channel;
using shmoe::transport::Transport;

// A zero-length put-with-signal moves no data (dest and source may then be null) and still
// updates the signal.
void put_signal(shmem_ctx_t ctx, void* dest, const void* source, std::size_t bytes,
                std::uint64_t* sig_addr, std::uint64_t signal, int sig_op, int pe, bool nbi,
                const char* fn) {
  if (sig_op != SHMEM_SIGNAL_SET && sig_op != SHMEM_SIGNAL_ADD) {
    shmoe::api_error(fn, "sig_op={} is neither SHMEM_SIGNAL_SET ({}) nor SHMEM_SIGNAL_ADD ({})",
                     sig_op, SHMEM_SIGNAL_SET, SHMEM_SIGNAL_ADD);
  }
  auto& rt = shmoe::runtime(fn);
  const shmoe::transport::SignalUpdate update{
      shmoe::symmetric_offset(rt, sig_addr, sizeof(std::uint64_t), fn, "sig_addr"),
      sig_op == SHMEM_SIGNAL_ADD, signal};
  bool sent = false;
  const int world_pe =
      shmoe::api::transfer(ctx, dest, "dest", {source, "source"}, bytes, pe, fn,
                           [&](Transport& t, Channel* ch, int to, std::size_t off) {
                             t.put_signal(ch, to, off, source, bytes, update, nbi);
                             sent = true;
                           });
  if (!sent) {
    rt.transport().put_signal(shmoe::api::channel_of(ctx), world_pe, 0, nullptr, 0, update, nbi);
  }
}

// signal_add/signal_set (OpenSHMEM 1.6): the signal update of a put-with-signal with no data before
// it, so nothing to wait for: a posted AMO on the word (complete at quiet, ordered by fence), the
// same UCP or CPU atomic put-with-signal's update is, so the two are atomic with each other and
// with signal_fetch/wait_until. Over UCX it skips the flush a put-with-signal's signal waits for.
void signal_update(shmem_ctx_t ctx, std::uint64_t* sig_addr, std::uint64_t signal, bool add, int pe,
                   const char* fn) {
  auto& rt = shmoe::runtime(fn);
  const std::size_t offset =
      shmoe::api::check_remote(ctx, rt, sig_addr, sizeof(std::uint64_t), pe, fn, "sig_addr");
  using shmoe::transport::AmoOp;
  rt.transport().post_atomic(shmoe::api::channel_of(ctx), pe, offset,
                             {add ? AmoOp::kAdd : AmoOp::kStore, 8, signal, 0});
}

}  // namespace

extern "C" {

#define SHMOE_SIGNAL_PARAMS(T)                                                                \
  (T * dest, const T* source, size_t nelems, uint64_t* sig_addr, uint64_t signal, int sig_op, \
   int pe)
#define SHMOE_SIGNAL_ARGS (dest, source, nelems, sig_addr, signal, sig_op, pe)

#define SHMOE_DEF_PUT_SIGNAL(NAME, T, ELEM_BYTES, FN)                                              \
  SHMOE_DEFINE_BOTH(                                                                               \
      void, NAME, SHMOE_SIGNAL_PARAMS(T), SHMOE_SIGNAL_ARGS,                                       \
      put_signal(ctx, dest, source, nelems*(ELEM_BYTES), sig_addr, signal, sig_op, pe, false, FN)) \
  SHMOE_DEFINE_BOTH(void, NAME##_nbi, SHMOE_SIGNAL_PARAMS(T), SHMOE_SIGNAL_ARGS,                   \
                    put_signal(ctx, dest, source, nelems*(ELEM_BYTES), sig_addr, signal, sig_op,   \
                               pe, true, FN "_nbi"))

#define SHMOE_DEF_PUT_SIGNAL_TYPED(T, N) \
  SHMOE_DEF_PUT_SIGNAL(N##_put_signal, T, sizeof(T), "shmem_" #N "_put_signal")
SHMOE_RMA_TYPES(SHMOE_DEF_PUT_SIGNAL_TYPED)

#define SHMOE_DEF_PUT_SIGNAL_SIZED(BITS, T) \
  SHMOE_DEF_PUT_SIGNAL(put##BITS##_signal, void, sizeof(T), "shmem_put" #BITS "_signal")
SHMOE_RMA_SIZES(SHMOE_DEF_PUT_SIGNAL_SIZED)

SHMOE_DEF_PUT_SIGNAL(putmem_signal, void, 1, "shmem_putmem_signal")

#define SHMOE_SIGNAL_ONLY_PARAMS (uint64_t * sig_addr, uint64_t signal, int pe)
#define SHMOE_SIGNAL_ONLY_ARGS (sig_addr, signal, pe)
SHMOE_DEFINE_BOTH(void, signal_add, SHMOE_SIGNAL_ONLY_PARAMS, SHMOE_SIGNAL_ONLY_ARGS,
                  signal_update(ctx, sig_addr, signal, true, pe, "shmem_signal_add"))
SHMOE_DEFINE_BOTH(void, signal_set, SHMOE_SIGNAL_ONLY_PARAMS, SHMOE_SIGNAL_ONLY_ARGS,
                  signal_update(ctx, sig_addr, signal, false, pe, "shmem_signal_set"))

uint64_t pshmem_signal_fetch(const uint64_t* sig_addr) {
  shmoe::run_wait_progress();  // a caller polling the signal must see it arrive over UCX too
  return std::atomic_ref<std::uint64_t>(*const_cast<std::uint64_t*>(sig_addr))
      .load(std::memory_order_acquire);
}

uint64_t pshmem_signal_wait_until(uint64_t* sig_addr, int cmp, uint64_t cmp_value) {
  return shmoe::api::wait_until_u64("shmem_signal_wait_until", sig_addr, cmp, cmp_value);
}
SHMOE_WEAK_ALIAS(shmem_signal_fetch)
SHMOE_WEAK_ALIAS(shmem_signal_wait_until)

}  // extern "C"
