#include "deep_ep/elastic_landing.hpp"

#include <shmem.h>

#include <algorithm>
#include <cstring>

namespace shmoe::deep_ep {
namespace {

std::int64_t align_up(std::int64_t v, std::int64_t a) {
  return (v + a - 1) / a * a;
}

}  // namespace

// A header: [the block this rank receives into or -1, tokens to each rank, pairs to each expert].
std::vector<std::int32_t> ElasticLanding::header(int taken, const std::int32_t* topk_idx) const {
  const int n = b_.num_ranks();
  std::vector<std::int32_t> h(static_cast<std::size_t>(1 + n + s_.experts), 0);
  h[0] = taken;
  std::int32_t* tokens = h.data() + 1;
  std::int32_t* pairs = tokens + n;
  std::vector<std::int64_t> last(static_cast<std::size_t>(n), -1);  // the last token to rank j
  for (std::int64_t t = 0; t < s_.tokens; ++t) {
    for (std::int64_t k = 0; k < s_.topk; ++k) {
      const std::int32_t e = topk_idx[t * s_.topk + k];
      if (e < 0) continue;
      ++pairs[e];
      const auto j = static_cast<std::size_t>(e / s_.local);
      if (last[j] != t) ++tokens[j];
      last[j] = t;
    }
  }
  return h;
}

ElasticLanding::ElasticLanding(ElasticBuffer& b, const Shape& s, const std::int32_t* topk_idx)
    : b_(b), blocks_(b.blocks()), s_(s) {
  const int n = b.num_ranks(), me = b.rank();
  const std::int64_t ints = 1 + n + s.experts;
  std::int32_t* headers = b.headers(ints);  // collective where it grows
  taken_ = blocks_.take();
  const std::vector<std::int32_t> h = header(taken_, topk_idx);
  std::int32_t* at = headers + me * ints;
  for (int j = 0; j < n; ++j) {
    if (auto* p = static_cast<std::int32_t*>(shmem_ptr(at, j))) {
      std::copy(h.begin(), h.end(), p);
    } else {
      shmem_putmem_nbi(at, h.data(), h.size() * 4, j);  // h lives past the barrier's quiet
    }
  }
  shmem_barrier_all();
  place(headers, ints);
}

ElasticLanding::~ElasticLanding() {
  if (taken_ >= 0) blocks_.give(taken_);
}

// Every rank's block where its rows fit it, and this sender's rows at each.
void ElasticLanding::place(const std::int32_t* headers, std::int64_t ints) {
  const int n = b_.num_ranks();
  block_.assign(static_cast<std::size_t>(n), -1);
  mapped_.assign(static_cast<std::size_t>(n), nullptr);
  token_base_.assign(static_cast<std::size_t>(n), 0);
  pair_next_.assign(static_cast<std::size_t>(s_.experts), 0);
  for (int j = 0; j < n; ++j) {
    const std::int64_t rows = rows_of(j, headers, ints);
    const std::int32_t block = headers[j * ints];
    if (j == b_.rank()) rows_ = rows;
    if (block < 0 || static_cast<std::uint64_t>(rows * s_.row_bytes) > blocks_.bytes()) continue;
    block_[static_cast<std::size_t>(j)] = block;
    mapped_[static_cast<std::size_t>(j)] =
        static_cast<std::byte*>(shmem_ptr(blocks_.block(block), j));
  }
  if (taken_ >= 0 && !direct(b_.rank())) {
    blocks_.give(taken_);  // its rows do not fit a block: this rank copies
    taken_ = -1;
  }
}

// Rank j's recv_x rows (the worst case without do_cpu_sync), and this sender's first row there.
std::int64_t ElasticLanding::rows_of(int j, const std::int32_t* headers, std::int64_t ints) {
  const int n = b_.num_ranks(), me = b_.rank();
  const std::int64_t worst = n * s_.max_tokens;
  if (!s_.expand) {
    std::int64_t rows = 0;
    for (int i = 0; i < n; ++i) {
      if (i == me) token_base_[static_cast<std::size_t>(j)] = rows;
      rows += headers[i * ints + 1 + j];
    }
    return s_.cpu_sync ? rows : worst;
  }
  std::int64_t start = 0;
  for (std::int64_t e = j * s_.local; e < (j + 1) * s_.local; ++e) {
    std::int64_t count = 0;
    for (int i = 0; i < n; ++i) {
      if (i == me) pair_next_[static_cast<std::size_t>(e)] = start + count;
      count += headers[i * ints + 1 + n + e];
    }
    start += align_up(count, s_.align);
  }
  return s_.cpu_sync ? start : worst * std::min(s_.topk, s_.local) + s_.local * (s_.align - 1);
}

void ElasticLanding::write(int j, std::int64_t row, const std::byte* src) const {
  const auto uj = static_cast<std::size_t>(j);
  const auto bytes = static_cast<std::size_t>(s_.row_bytes);
  const std::uint64_t at = static_cast<std::uint64_t>(row) * bytes;
  if (mapped_[uj] != nullptr) {
    std::memcpy(mapped_[uj] + at, src, bytes);
  } else {
    shmem_putmem_nbi(blocks_.block(block_[uj]) + at, src, bytes, j);
  }
}

std::byte* ElasticLanding::mine() const {
  return blocks_.block(block_[static_cast<std::size_t>(b_.rank())]);
}

std::shared_ptr<std::byte[]> ElasticLanding::lend(ResultCounts& counts) {
  const bool in_block = direct(b_.rank());
  counts.count(in_block);
  if (!in_block) return nullptr;
  const int block = taken_;
  taken_ = -1;
  return BlockLender::lend(blocks_.lender(), block, mine());
}

}  // namespace shmoe::deep_ep
