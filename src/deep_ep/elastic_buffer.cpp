#include "deep_ep/elastic_buffer.hpp"

#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>

#include "common/settings.hpp"
#include "deep_ep/checks.hpp"
#include "moe/moe.hpp"

namespace shmoe::deep_ep {
namespace {

constexpr std::uint64_t kAlignment = std::uint64_t{2} << 20;  // DeepEP's buffer alignment
// A hint for num_topk 0 (DeepEP allows it) sizes for this many top-k choices.
constexpr int kTopkWithoutHint = 16;
std::atomic<std::uint64_t> next_id{1};

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) {
  return (v + a - 1) / a * a;
}

}  // namespace

std::int64_t ElasticBuffer::dispatch_slot_bytes(std::int64_t row_bytes, int num_topk) {
  const std::int64_t head = 4 + 8 * static_cast<std::int64_t>(num_topk);
  return static_cast<std::int64_t>(align_up(static_cast<std::uint64_t>(head + row_bytes), 16));
}

std::uint64_t ElasticBuffer::size_hint(const shmoe_elastic_buffer_config_t& c, int num_ranks) {
  const std::uint64_t tokens = static_cast<std::uint64_t>(std::max(c.num_max_tokens_per_rank, 1));
  const std::uint64_t hidden = static_cast<std::uint64_t>(std::max(c.hidden, 1));
  const int topk = c.num_topk > 0 ? c.num_topk : kTopkWithoutHint;
  const std::uint64_t row = c.use_fp8_dispatch ? hidden + 4 * ((hidden + 127) / 128) : 2 * hidden;
  const std::uint64_t dispatch =
      static_cast<std::uint64_t>(num_ranks) * tokens *
      static_cast<std::uint64_t>(dispatch_slot_bytes(static_cast<std::int64_t>(row), topk));
  const std::uint64_t combine = tokens * static_cast<std::uint64_t>(topk) *
                                (2 * hidden + 4 * static_cast<std::uint64_t>(num_ranks));
  return align_up(std::max(dispatch, combine), kAlignment);
}

ElasticBuffer::ElasticBuffer(const shmoe_elastic_buffer_config_t& config)
    : config_(config), n_(shmem_n_pes()), me_(shmem_my_pe()), id_(next_id++) {
  ranks_per_host_ = host_layout(n_, me_);
  window_bytes_ = config.num_bytes != 0 ? config.num_bytes : size_hint(config, n_);
  window_ = static_cast<std::byte*>(shmem_malloc(window_bytes_));
  counts_ = static_cast<std::int32_t*>(shmem_calloc(static_cast<std::size_t>(n_), 4));
  if (window_ == nullptr || counts_ == nullptr) {
    shmem_free(window_);
    shmem_free(counts_);
    throw std::runtime_error(fmt::format(
        "ElasticBuffer: the symmetric heap cannot hold num_bytes={} (set SHMEM_SYMMETRIC_SIZE "
        "larger)",
        window_bytes_));
  }
}

ElasticBuffer::~ElasticBuffer() {
  blocks_.reset();
  shmem_free(headers_);
  shmem_free(counts_);
  shmem_free(window_);
}

ElasticBlocks& ElasticBuffer::blocks() {
  // Room is left for the primitives' memory (at most num_bytes, one at a time).
  if (!blocks_) {
    blocks_ = std::make_unique<ElasticBlocks>(recv_block_bytes(config_, n_), window_bytes_,
                                              "ElasticBuffer.dispatch");
  }
  return *blocks_;
}

std::uint64_t ElasticBuffer::recv_block_bytes(const shmoe_elastic_buffer_config_t& c,
                                              int num_ranks) {
  if (c.num_max_tokens_per_rank <= 0 || c.hidden <= 0) {
    return c.num_bytes != 0 ? c.num_bytes : size_hint(c, num_ranks);
  }
  return static_cast<std::uint64_t>(num_ranks) *
         static_cast<std::uint64_t>(c.num_max_tokens_per_rank) * 2 *
         static_cast<std::uint64_t>(c.hidden);
}

std::uint64_t ElasticBuffer::heap_bytes(const shmoe_elastic_buffer_config_t& c, int num_ranks) {
  const std::uint64_t window = c.num_bytes != 0 ? c.num_bytes : size_hint(c, num_ranks);
  // Without the MoE settings a block is the whole buffer, and the blocks get only the room the
  // heap has (DeepEP's barrier test makes 1 GiB buffers at 4 ranks on one host's /dev/shm).
  const bool settings_given = c.num_max_tokens_per_rank > 0 && c.hidden > 0;
  const std::uint64_t blocks =
      settings_given ? static_cast<std::uint64_t>(settings::deep_ep_recv_blocks()) : 0;
  return 2 * window + blocks * recv_block_bytes(c, num_ranks) + kHeapMargin;
}

std::int32_t* ElasticBuffer::headers(std::int64_t ints) {
  if (ints > header_ints_) {
    shmem_free(headers_);
    headers_ = static_cast<std::int32_t*>(shmem_malloc(static_cast<std::size_t>(n_ * ints) * 4));
    header_ints_ = headers_ == nullptr ? 0 : ints;
    if (headers_ == nullptr) throw std::runtime_error("ElasticBuffer.dispatch: the heap is full");
  }
  return headers_;
}

void ElasticBuffer::require_fits(const char* call, std::uint64_t bytes, const char* what) const {
  if (bytes > window_bytes_) {
    throw moe::Refused(fmt::format(
        "{}: the call needs {} bytes of the buffer ({}) but the buffer has num_bytes={}: make it "
        "with larger MoE settings (ElasticBuffer.get_buffer_size_hint)",
        call, bytes, what, window_bytes_));
  }
}

}  // namespace shmoe::deep_ep
