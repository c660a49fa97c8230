// Where a dispatch's recv_x rows land with no copy (docs/deep_ep.md, "Results with no copy"):
// each rank names a free receive block (or none) in a header exchange that also carries what it
// sends (tokens to each rank, (token, expert) pairs to each expert), so every sender knows where
// each of its rows goes in each receiver's block. The order is the copy's: source rank, then
// token (with do_expand: per local expert, each expert's run at its aligned start).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "deep_ep/elastic_buffer.hpp"

namespace shmoe::deep_ep {

class ElasticLanding {
 public:
  // A dispatch's shape: every value but `tokens` alike on every rank.
  struct Shape {
    std::int64_t tokens = 0, topk = 0, experts = 0, local = 0, max_tokens = 0, align = 1;
    std::int64_t row_bytes = 0;
    bool expand = false, cpu_sync = true;
  };
  // Collective (one barrier): takes a free block, if any, and exchanges the headers; `topk_idx`
  // is [tokens][topk] global experts or -1.
  ElasticLanding(ElasticBuffer& b, const Shape& s, const std::int32_t* topk_idx);
  ElasticLanding(const ElasticLanding&) = delete;
  ElasticLanding& operator=(const ElasticLanding&) = delete;
  // Gives back a block no result took (a call that failed after the exchange).
  ~ElasticLanding();

  // Whether rank j receives into a block.
  bool direct(int j) const { return block_[static_cast<std::size_t>(j)] >= 0; }
  // Writes the row at `src` as row `row` of rank j's block: a store where mapped, else a put.
  void write(int j, std::int64_t row, const std::byte* src) const;
  // The row of this sender's k-th token to rank j (one row per token).
  std::int64_t token_row(int j, std::int64_t k) const {
    return token_base_[static_cast<std::size_t>(j)] + k;
  }
  // The row of this sender's next (token, expert e) pair (do_expand), e global.
  std::int64_t next_pair_row(std::int32_t e) { return pair_next_[static_cast<std::size_t>(e)]++; }
  // This rank's rows (recv_x's first dimension) and their address in its block.
  std::int64_t rows() const { return rows_; }
  std::byte* mine() const;
  // Counts this rank's dispatch; memory owning its block when it received into one, else null.
  std::shared_ptr<std::byte[]> lend(ResultCounts& counts);

 private:
  std::vector<std::int32_t> header(int taken, const std::int32_t* topk_idx) const;
  void place(const std::int32_t* headers, std::int64_t ints);
  std::int64_t rows_of(int j, const std::int32_t* headers, std::int64_t ints);

  ElasticBuffer& b_;
  ElasticBlocks& blocks_;
  const Shape s_;
  int taken_ = -1;                        // the block this rank took, until lent or given back
  std::vector<std::int32_t> block_;       // [n]: each rank's block, or -1 (it copies)
  std::vector<std::byte*> mapped_;        // [n]: each rank's block where mapped
  std::vector<std::int64_t> token_base_;  // [n]: this sender's first row at each rank
  std::vector<std::int64_t> pair_next_;   // [experts]: this sender's next row of each expert
  std::int64_t rows_ = 0;
};

}  // namespace shmoe::deep_ep
