// AGRS sessions. Each PE's AGRS memory is the session data (num_max_session_bytes), then one
// signal word per (all-gather call of a session, source PE). The c-th all-gather of a session
// puts this PE's tensors into its place in every PE's regions, fences, and sets its word of call
// c at every PE to the session's number; waiting for the call is waiting until every PE's word
// holds it. Sessions are numbered from 1 on every PE alike, and a session ends in an agreement
// (after this PE's puts are complete), so no PE writes a session's data into a PE that may still
// read the previous one's.
#include <fmt/format.h>
#include <shmem.h>

#include <cstring>
#include <string>

#include "deep_ep/checks.hpp"
#include "deep_ep/primitives.hpp"
#include "moe/moe.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::deep_ep {
namespace {

constexpr const char* kAllGather = "ElasticBuffer.all_gather";

std::int64_t region_bytes(std::int64_t bytes, int n) {
  return static_cast<std::int64_t>(align_to(static_cast<std::uint64_t>(bytes * n), 32));
}

}  // namespace

Agrs::Agrs(const ElasticBuffer& b, std::int64_t num_max_session_bytes, int num_max_calls)
    : n_(b.num_ranks()),
      me_(b.rank()),
      max_bytes_(static_cast<std::int64_t>(
          align_to(static_cast<std::uint64_t>(num_max_session_bytes), 32))),
      max_calls_(num_max_calls),
      memory_(static_cast<std::size_t>(max_bytes_) +
                  static_cast<std::size_t>(kMaxCallsPerSession * n_) * 8,
              "ElasticBuffer.agrs_set_config") {
  shmem_barrier_all();  // every PE's signals are zero before any PE gathers
}

std::uint64_t* Agrs::signals(int call) const {
  return reinterpret_cast<std::uint64_t*>(memory_.get() + max_bytes_) +
         static_cast<std::ptrdiff_t>(call) * n_;
}

void Agrs::create_session() {
  if (in_session_) {
    throw moe::Refused(
        "ElasticBuffer.create_agrs_session: a session is open already (destroy_agrs_session "
        "ends it)");
  }
  in_session_ = true;
  ++session_;
  offset_ = 0;
  call_ = 0;
}

void Agrs::destroy_session() {
  constexpr const char* kCall = "ElasticBuffer.destroy_agrs_session";
  const std::string why = in_session_ ? "" : std::string(kCall) + ": no session is open";
  shmem_quiet();  // this PE's data and signals have landed before the agreement says so
  agree(SHMEM_TEAM_WORLD, kCall, why,
        {{"the session's number", static_cast<std::int64_t>(session_)}});
  in_session_ = false;
}

std::vector<void*> Agrs::inplace(const std::vector<std::int64_t>& bytes) const {
  constexpr const char* kCall = "ElasticBuffer.agrs_get_inplace_tensor";
  if (!in_session_) throw moe::Refused(std::string(kCall) + ": no session is open");
  if (call_ >= max_calls_) {
    throw moe::Refused(
        fmt::format("{}: the session has made all its num_max_all_gathers={} "
                    "calls (agrs_set_config); end it first",
                    kCall, max_calls_));
  }
  std::vector<void*> out;
  std::int64_t offset = offset_;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] < 0 || offset + region_bytes(bytes[i], n_) > max_bytes_) {
      throw moe::Refused(
          fmt::format("{}: tensor {} of {} bytes does not fit: the session has "
                      "used {} of num_max_session_bytes={} and it needs {} more",
                      kCall, i, bytes[i], offset, max_bytes_, region_bytes(bytes[i], n_)));
    }
    out.push_back(memory_.get() + offset + bytes[i] * me_);
    offset += region_bytes(bytes[i], n_);
  }
  return out;
}

shmoe_elastic_agrs_ticket_t Agrs::all_gather(const shmoe_tensor_t* tensors, int n,
                                             void** gathered) {
  if (!in_session_) throw moe::Refused(std::string(kAllGather) + ": no session is open");
  if (call_ >= max_calls_) {
    throw moe::Refused(
        fmt::format("{}: the session has made all its "
                    "num_max_all_gathers_per_session={} calls; end it first",
                    kAllGather, max_calls_));
  }
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(n));
  std::int64_t offset = offset_;
  for (int i = 0; i < n; ++i) {
    const shmoe_tensor_t& t = tensors[i];
    const std::int64_t bytes = tensor_bytes(t);
    if (t.data == nullptr) throw moe::Refused(fmt::format("{}: t[{}] is missing", kAllGather, i));
    if (offset + region_bytes(bytes, n_) > max_bytes_) {
      throw moe::Refused(
          fmt::format("{}: t[{}] ({} bytes from each of {} ranks) does not fit: "
                      "the session has used {} of num_max_session_bytes={}",
                      kAllGather, i, bytes, n_, offset, max_bytes_));
    }
    const auto* p = static_cast<const std::byte*>(t.data);
    const bool inside = p >= memory_.get() && p < memory_.get() + max_bytes_;
    if (inside && p != memory_.get() + offset + bytes * me_) {
      throw moe::Refused(
          fmt::format("{}: t[{}] lies in the session's memory but not at this "
                      "all-gather's place for it (agrs_get_inplace_tensor gives "
                      "the tensors of the next all-gather)",
                      kAllGather, i));
    }
    offsets[static_cast<std::size_t>(i)] = offset;
    offset += region_bytes(bytes, n_);
  }
  for (int r = 0; r < n_; ++r) {
    const int pe = (me_ + r) % n_;
    for (int i = 0; i < n; ++i) {
      const std::int64_t bytes = tensor_bytes(tensors[i]);
      std::byte* dst = memory_.get() + offsets[static_cast<std::size_t>(i)] + bytes * me_;
      if (pe != me_) {
        shmem_putmem(dst, tensors[i].data, static_cast<std::size_t>(bytes), pe);
      } else if (dst != tensors[i].data) {
        std::memcpy(dst, tensors[i].data, static_cast<std::size_t>(bytes));
      }
    }
  }
  shmem_fence();  // each PE's data lands before this PE's signal there
  for (int r = 1; r < n_; ++r) shmem_signal_set(signals(call_) + me_, session_, (me_ + r) % n_);
  for (int i = 0; i < n; ++i) gathered[i] = memory_.get() + offsets[static_cast<std::size_t>(i)];
  offset_ = offset;
  return {session_, call_++};
}

void Agrs::wait(shmoe_elastic_agrs_ticket_t ticket) const {
  if (!in_session_ || ticket.session != session_ || ticket.call < 0 || ticket.call >= call_) {
    throw moe::Refused(
        fmt::format("ElasticBuffer.all_gather's handle: its session ({}) has "
                    "ended; wait for an all-gather inside its session",
                    ticket.session));
  }
  for (int r = 1; r < n_; ++r) {
    shmem_signal_wait_until(signals(ticket.call) + (me_ + r) % n_, SHMEM_CMP_GE, session_);
  }
}

void agrs_set_config(ElasticBuffer& b, std::int64_t num_max_session_bytes, int num_max_calls) {
  constexpr const char* kCall = "ElasticBuffer.agrs_set_config";
  Checks checks(kCall);
  Primitives& p = primitives_of(b);
  if (p.agrs != nullptr && p.agrs->in_session()) {
    checks.refuse("a session is open (destroy_agrs_session first)");
  }
  checks.range("num_max_session_bytes", num_max_session_bytes, 1);
  checks.range("num_max_all_gathers_per_session", num_max_calls, 1, Agrs::kMaxCallsPerSession);
  agree(SHMEM_TEAM_WORLD, kCall, checks.why(),
        {{"num_max_session_bytes", num_max_session_bytes},
         {"num_max_all_gathers_per_session", num_max_calls}});
  b.require_fits(kCall, static_cast<std::uint64_t>(num_max_session_bytes),
                 "num_max_session_bytes, as DeepEP's buffer (get_agrs_buffer_size_hint)");
  p.agrs.reset();  // collective: frees the previous configuration's memory first
  p.agrs = std::make_unique<Agrs>(b, num_max_session_bytes, num_max_calls);
}

}  // namespace shmoe::deep_ep
