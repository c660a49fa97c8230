// The ElasticBuffer (shmoe/elastic.h): DeepEP V2's expert-parallel dispatch and combine over a
// symmetric window. Every call is a call object (elastic_dispatch.cpp, elastic_combine.cpp) with
// the same shape: check the arguments locally, agree on the verdict and the values every rank
// must pass alike (the agreement is also the barrier that says every rank has finished reading
// the window of the previous call), write rows into the other ranks' windows, barrier, read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "deep_ep/elastic_blocks.hpp"
#include "deep_ep/result.hpp"
#include "shmoe/elastic.h"

namespace shmoe::deep_ep {

class ElasticBuffer {
 public:
  // Collective: allocates the window (config.num_bytes, or the size hint of its MoE settings).
  explicit ElasticBuffer(const shmoe_elastic_buffer_config_t& config);
  ElasticBuffer(const ElasticBuffer&) = delete;
  ElasticBuffer& operator=(const ElasticBuffer&) = delete;
  // Collective: frees the window.
  ~ElasticBuffer();

  static std::uint64_t size_hint(const shmoe_elastic_buffer_config_t& config, int num_ranks);
  // Bytes of a receive block: a BF16 recv_x of one row per token at the MoE settings (ranks x
  // num_max_tokens_per_rank x hidden x 2), or without them the buffer's bytes.
  static std::uint64_t recv_block_bytes(const shmoe_elastic_buffer_config_t& config, int num_ranks);
  // Symmetric heap for one buffer (shmoe_elastic_buffer_heap_size): the window, as much again for
  // a primitive's memory, SHMOE_DEEP_EP_RECV_BLOCKS receive blocks (given the MoE settings),
  // kHeapMargin.
  static std::uint64_t heap_bytes(const shmoe_elastic_buffer_config_t& config, int num_ranks);
  static constexpr std::uint64_t kHeapMargin = 64ULL << 20;  // headers, counts
  // Bytes a dispatch slot takes: the token index, the top-k indices and weights, the row.
  static std::int64_t dispatch_slot_bytes(std::int64_t row_bytes, int num_topk);

  // Collective calls; the result has one reference, the caller's.
  shmoe_ep_result* dispatch(const shmoe_elastic_dispatch_args_t& args);
  shmoe_ep_result* combine(const shmoe_elastic_combine_args_t& args);

  const shmoe_elastic_buffer_config_t& config() const { return config_; }
  int num_ranks() const { return n_; }
  int rank() const { return me_; }
  int num_hosts() const { return n_ / ranks_per_host_; }
  int ranks_per_host() const { return ranks_per_host_; }
  // Logical (scale-out, scale-up) sizes: (hosts, ranks per host) in hybrid mode, else (1, n).
  int logical_scaleup() const { return hybrid() ? ranks_per_host_ : n_; }
  bool hybrid() const { return config_.allow_hybrid_mode && num_hosts() > 1; }
  std::uint64_t id() const { return id_; }

  std::byte* window() const { return window_; }
  std::uint64_t window_bytes() const { return window_bytes_; }
  std::int32_t* counts() const { return counts_; }
  // Collective (the first call makes them): the receive blocks dispatch lends as recv_x.
  ElasticBlocks& blocks();
  // Collective where it grows: the dispatch headers, `ints` int32 per PE ([n][ints]).
  std::int32_t* headers(std::int64_t ints);
  // How the dispatches returned recv_x: in a receive block or copied.
  ResultCounts& result_counts() { return result_counts_; }
  // Where the calls' results live.
  const std::shared_ptr<ArrayMemory>& memory() const { return memory_; }
  // `bytes` of the window must hold what a call of `what` needs (the same verdict on every PE).
  void require_fits(const char* call, std::uint64_t bytes, const char* what) const;

  // What the primitives beside dispatch and combine (PP, AGRS, Engram: primitives.hpp) keep with
  // the buffer: their symmetric memory, freed (collectively) with the buffer.
  struct Extension {
    virtual ~Extension() = default;
  };
  std::unique_ptr<Extension>& extension() { return extension_; }

 private:
  shmoe_elastic_buffer_config_t config_{};
  int n_ = 0, me_ = 0, ranks_per_host_ = 1;
  std::uint64_t id_ = 0;
  std::byte* window_ = nullptr;
  std::uint64_t window_bytes_ = 0;
  std::int32_t* counts_ = nullptr;  // [n]: the tokens each rank sent in this call
  std::int32_t* headers_ = nullptr;
  std::int64_t header_ints_ = 0;
  std::unique_ptr<ElasticBlocks> blocks_;
  ResultCounts result_counts_;
  std::shared_ptr<ArrayMemory> memory_ = std::make_shared<ArrayMemory>();
  // Last: freed after the window, on every PE alike.
  std::unique_ptr<Extension> extension_;
};

}  // namespace shmoe::deep_ep
