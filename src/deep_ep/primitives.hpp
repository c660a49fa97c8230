// The ElasticBuffer's primitives beside dispatch and combine (shmoe/elastic_primitives.h): PP
// (pp.cpp), AGRS sessions (agrs.cpp) and Engram (engram.cpp). Each keeps its state and its own
// symmetric memory in the buffer's Extension, so destroying the buffer frees them. The
// collective calls have the shape of dispatch's: check locally, agree (every PE refuses
// together), then allocate or move data; the one-sided calls check on the calling PE alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "deep_ep/elastic_buffer.hpp"
#include "deep_ep/result.hpp"
#include "shmoe/elastic_primitives.h"

namespace shmoe::deep_ep {

constexpr std::uint64_t kPrimitiveAlignment = std::uint64_t{2} << 20;  // DeepEP's 2 MiB

inline std::uint64_t align_to(std::uint64_t v, std::uint64_t a) {
  return (v + a - 1) / a * a;
}

// Bytes of a C-contiguous tensor (0 when not given).
std::int64_t tensor_bytes(const shmoe_tensor_t& t);

// A block of symmetric memory: allocated and freed collectively (every PE alike), zeroed.
class SymmetricMemory {
 public:
  SymmetricMemory() = default;
  // Collective; throws (on every PE, the sizes being agreed) when the heap cannot hold it.
  SymmetricMemory(std::size_t bytes, const char* what);
  ~SymmetricMemory();
  SymmetricMemory(SymmetricMemory&& o) noexcept;
  SymmetricMemory& operator=(SymmetricMemory&& o) noexcept;
  SymmetricMemory(const SymmetricMemory&) = delete;
  SymmetricMemory& operator=(const SymmetricMemory&) = delete;

  std::byte* get() const { return p_; }
  std::size_t bytes() const { return bytes_; }

 private:
  std::byte* p_ = nullptr;
  std::size_t bytes_ = 0;
};

// PP between ring neighbours (pp.cpp).
class Pp {
 public:
  // Collective (after the caller's agreement): the slots of the configuration.
  Pp(const ElasticBuffer& b, std::int64_t num_max_tensor_bytes, int num_max_inflight_tensors);
  void send(const shmoe_tensor_t& t, int dst_rank);
  void recv(const shmoe_tensor_t& t, int src_rank);

  static std::uint64_t size_hint(std::int64_t num_max_tensor_bytes, int num_max_inflight_tensors);

 private:
  // Which of the receiver's two neighbour channels a tensor from `src` to `dst` takes: 0 when
  // dst is src's next rank, else 1 (DeepEP's numbering: with two ranks, always 0).
  int channel(int src, int dst) const { return dst == (src + 1) % n_ ? 0 : 1; }
  void check_peer(const char* call, const char* name, int peer) const;
  std::int64_t slot_fitting(const char* call, const shmoe_tensor_t& t) const;
  std::uint64_t* arrived() const;  // [2]: tensors arrived on each channel
  std::uint64_t* freed() const;    // [2]: by channel at the receiver, tensors it has received
  std::uint64_t* sizes() const;    // [2][inflight]: each slot's byte count
  std::byte* slot(int ch, std::uint64_t k) const;

  int n_, me_;
  std::int64_t slot_bytes_;
  int inflight_;
  SymmetricMemory memory_;
  std::uint64_t sent_[2] = {0, 0}, received_[2] = {0, 0};
};

// AGRS sessions (agrs.cpp).
class Agrs {
 public:
  static constexpr int kMaxCallsPerSession = 32;  // DeepEP's limit
  Agrs(const ElasticBuffer& b, std::int64_t num_max_session_bytes, int num_max_calls);
  void create_session();
  void destroy_session();  // collective
  std::vector<void*> inplace(const std::vector<std::int64_t>& bytes) const;
  shmoe_elastic_agrs_ticket_t all_gather(const shmoe_tensor_t* tensors, int n, void** gathered);
  void wait(shmoe_elastic_agrs_ticket_t ticket) const;
  bool in_session() const { return in_session_; }

 private:
  std::uint64_t* signals(int call) const;  // [num_ranks]: the session whose data each PE sent

  int n_, me_;
  std::int64_t max_bytes_;
  int max_calls_;
  SymmetricMemory memory_;  // [max_bytes_] data, then [kMaxCallsPerSession][n_] signals
  std::uint64_t session_ = 0;
  bool in_session_ = false;
  std::int64_t offset_ = 0;
  int call_ = 0;
};

// Engram's storage (engram.cpp).
class Engram {
 public:
  // Collective (the caller has agreed): writes this PE's storage.
  void write(const ElasticBuffer& b, const shmoe_elastic_engram_write_args_t& a);
  shmoe_ep_result* fetch(const shmoe_tensor_t& indices, bool col_major_sf) const;
  bool written() const { return num_entries_ > 0; }

 private:
  int n_ = 0, me_ = 0;
  std::int64_t num_entries_ = 0, hidden_ = 0, row_bytes_ = 0;
  shmoe_dtype_t dtype_ = SHMOE_DTYPE_BFLOAT16;
  SymmetricMemory storage_;
  std::vector<std::byte> sf_;  // [num_ranks * num_entries][sf_packs_] 4-byte packs
  std::int64_t sf_packs_ = 0;
  shmoe_dtype_t sf_dtype_ = SHMOE_DTYPE_FLOAT32;
};

// The primitives' state of one buffer.
struct Primitives final : ElasticBuffer::Extension {
  std::unique_ptr<Pp> pp;
  std::unique_ptr<Agrs> agrs;
  Engram engram;
};

// The buffer's primitives (made on first use, the same on every PE).
Primitives& primitives_of(ElasticBuffer& b);

// The collective calls (pp.cpp, agrs.cpp, engram.cpp): check, agree, then (re)configure.
void pp_set_config(ElasticBuffer& b, std::int64_t num_max_tensor_bytes,
                   int num_max_inflight_tensors);
void agrs_set_config(ElasticBuffer& b, std::int64_t num_max_session_bytes, int num_max_calls);
void engram_write(ElasticBuffer& b, const shmoe_elastic_engram_write_args_t& a);

}  // namespace shmoe::deep_ep
