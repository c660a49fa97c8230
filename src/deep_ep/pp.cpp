// PP: tensors between ring neighbours. Each PE's PP memory holds, per neighbour channel (see
// Pp::channel), num_max_inflight_tensors slots and their byte counts, and two signal words per
// channel: `arrived` (tensors the neighbour has written into this PE's slots) and `freed` (of this
// PE's tensors to that neighbour, how many it has received). The k-th tensor on a channel takes
// slot k % inflight. A send waits until its slot is freed, puts the tensor, then (fenced) its byte
// count with the `arrived` signal; a receive waits for the signal, copies the slot out and sets
// the sender's `freed`. Both only ever wait on their own PE's words.
#include <fmt/format.h>
#include <shmem.h>

#include <atomic>
#include <cstring>

#include "deep_ep/checks.hpp"
#include "deep_ep/primitives.hpp"
#include "moe/moe.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::deep_ep {
namespace {

constexpr std::int64_t kHeadBytes = 64;  // arrived[2], freed[2], padded

std::int64_t sizes_bytes(int inflight) {
  return static_cast<std::int64_t>(align_to(2 * 8 * static_cast<std::uint64_t>(inflight), 32));
}

}  // namespace

std::uint64_t Pp::size_hint(std::int64_t num_max_tensor_bytes, int num_max_inflight_tensors) {
  const std::uint64_t slot = align_to(static_cast<std::uint64_t>(num_max_tensor_bytes), 32);
  return align_to(slot * static_cast<std::uint64_t>(num_max_inflight_tensors) * 2 * 2,
                  kPrimitiveAlignment);
}

Pp::Pp(const ElasticBuffer& b, std::int64_t num_max_tensor_bytes, int num_max_inflight_tensors)
    : n_(b.num_ranks()),
      me_(b.rank()),
      slot_bytes_(static_cast<std::int64_t>(
          align_to(static_cast<std::uint64_t>(num_max_tensor_bytes), 32))),
      inflight_(num_max_inflight_tensors),
      memory_(static_cast<std::size_t>(kHeadBytes + sizes_bytes(inflight_) +
                                       2 * inflight_ * slot_bytes_),
              "ElasticBuffer.pp_set_config") {
  shmem_barrier_all();  // every PE's words are zero before any PE sends
}

std::uint64_t* Pp::arrived() const {
  return reinterpret_cast<std::uint64_t*>(memory_.get());
}
std::uint64_t* Pp::freed() const {
  return arrived() + 2;
}
std::uint64_t* Pp::sizes() const {
  return reinterpret_cast<std::uint64_t*>(memory_.get() + kHeadBytes);
}
std::byte* Pp::slot(int ch, std::uint64_t k) const {
  const auto index = static_cast<std::int64_t>(ch) * inflight_ +
                     static_cast<std::int64_t>(k % static_cast<std::uint64_t>(inflight_));
  return memory_.get() + kHeadBytes + sizes_bytes(inflight_) + index * slot_bytes_;
}

void Pp::check_peer(const char* call, const char* name, int peer) const {
  const int prev = (me_ + n_ - 1) % n_, next = (me_ + 1) % n_;
  if (n_ < 2 || peer == me_ || (peer != prev && peer != next)) {
    throw moe::Refused(
        fmt::format("{}: {}={} is not a ring neighbour of rank {} (of {} ranks: "
                    "{} or {})",
                    call, name, peer, me_, n_, prev, next));
  }
}

// t's bytes, refused unless it is a tensor that fits a slot.
std::int64_t Pp::slot_fitting(const char* call, const shmoe_tensor_t& t) const {
  const std::int64_t bytes = tensor_bytes(t);
  if (t.data == nullptr || bytes > slot_bytes_) {
    throw moe::Refused(
        fmt::format("{}: t ({} bytes) must be a tensor of at most "
                    "num_max_tensor_bytes={} bytes (pp_set_config)",
                    call, bytes, slot_bytes_));
  }
  return bytes;
}

void Pp::send(const shmoe_tensor_t& t, int dst_rank) {
  constexpr const char* kCall = "ElasticBuffer.pp_send";
  check_peer(kCall, "dst_rank_idx", dst_rank);
  const std::int64_t bytes = slot_fitting(kCall, t);
  const int there = channel(me_, dst_rank), here = 1 - there;  // here: dst's freed word for me
  std::uint64_t& k = sent_[here];
  if (k >= static_cast<std::uint64_t>(inflight_)) {
    shmem_signal_wait_until(freed() + here, SHMEM_CMP_GE, k - inflight_ + 1);
  }
  const auto slot_index = static_cast<std::size_t>(there * inflight_ + k % inflight_);
  shmem_putmem(slot(there, k), t.data, static_cast<std::size_t>(bytes), dst_rank);
  const auto size = static_cast<std::uint64_t>(bytes);
  shmem_fence();  // the data lands before its byte count and signal
  shmem_putmem_signal(sizes() + slot_index, &size, 8, arrived() + there, k + 1, SHMEM_SIGNAL_SET,
                      dst_rank);
  ++k;
}

void Pp::recv(const shmoe_tensor_t& t, int src_rank) {
  constexpr const char* kCall = "ElasticBuffer.pp_recv";
  check_peer(kCall, "src_rank_idx", src_rank);
  const std::int64_t bytes = slot_fitting(kCall, t);
  const int ch = channel(src_rank, me_);
  std::uint64_t& k = received_[ch];
  shmem_signal_wait_until(arrived() + ch, SHMEM_CMP_GE, k + 1);
  const std::uint64_t sent = std::atomic_ref<std::uint64_t>(
                                 sizes()[static_cast<std::size_t>(ch * inflight_ + k % inflight_)])
                                 .load(std::memory_order_acquire);
  if (static_cast<std::int64_t>(sent) != bytes) {
    throw moe::Refused(
        fmt::format("{}: t has {} bytes but rank {} sent a tensor of {} bytes "
                    "(it stays to be received)",
                    kCall, bytes, src_rank, sent));
  }
  std::memcpy(t.data, slot(ch, k), static_cast<std::size_t>(bytes));
  ++k;
  std::atomic_thread_fence(std::memory_order_acq_rel);  // the copy is done before the slot frees
  shmem_signal_set(freed() + (1 - ch), k, src_rank);
}

void pp_set_config(ElasticBuffer& b, std::int64_t num_max_tensor_bytes,
                   int num_max_inflight_tensors) {
  constexpr const char* kCall = "ElasticBuffer.pp_set_config";
  Checks checks(kCall);
  checks.range("num_max_tensor_bytes", num_max_tensor_bytes, 1);
  checks.range("num_max_inflight_tensors", num_max_inflight_tensors, 1);
  agree(SHMEM_TEAM_WORLD, kCall, checks.why(),
        {{"num_max_tensor_bytes", num_max_tensor_bytes},
         {"num_max_inflight_tensors", num_max_inflight_tensors}});
  b.require_fits(kCall,
                 static_cast<std::uint64_t>(num_max_tensor_bytes) *
                     static_cast<std::uint64_t>(num_max_inflight_tensors) * 4,
                 "num_max_tensor_bytes x num_max_inflight_tensors x 2 directions x 2 neighbours, "
                 "as DeepEP's buffer (ElasticBuffer.get_pp_buffer_size_hint)");
  Primitives& p = primitives_of(b);
  p.pp.reset();  // collective: frees the previous configuration's slots first
  p.pp = std::make_unique<Pp>(b, num_max_tensor_bytes, num_max_inflight_tensors);
}

}  // namespace shmoe::deep_ep
