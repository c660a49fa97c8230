// Dispatch's receive blocks: a pool of buffer-sized blocks in the symmetric window, each holding
// one dispatch's rows in recv_x's layout. A dispatch that asks for one takes a free block, tells
// every sender its index in the call header, and the senders write the rows straight into it; the
// block is then the caller's (its rows are the result: no copy out of the receive window) until
// the caller releases it. The pool is symmetric, but whether a block is free is known to its
// owner alone: a sender only ever writes the block its receiver named in the current call's
// header, so no PE writes a block its owner still holds. take, release and held may run on any
// thread (a result may be dropped on another thread while a call runs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace shmoe::moe {

class RecvBlocks {
 public:
  RecvBlocks() = default;
  // `base`: count blocks of block_bytes each in this PE's window; peer_base[pe]: the same bytes
  // as mapped here from PE pe's heap (null where it is not mapped).
  RecvBlocks(std::byte* base, std::size_t block_bytes, int count,
             std::vector<std::byte*> peer_base);

  int count() const { return count_; }
  int held() const;
  // A free block, now held, or -1 when every block is held.
  int take();
  // Gives a held block back; "" or why it cannot (an index out of range, a block not held),
  // naming `fn`.
  std::string release(int block, const char* fn);
  // Block `block`'s rows here (also its symmetric address), and as mapped from PE pe (or null).
  std::byte* rows(int block) const { return base_ + static_cast<std::size_t>(block) * bytes_; }
  std::byte* peer_rows(int pe, int block) const;

 private:
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
  int count_ = 0;
  std::unique_ptr<std::mutex> mutex_ = std::make_unique<std::mutex>();  // guards held_
  std::vector<bool> held_;
  std::vector<std::byte*> peer_base_;
};

}  // namespace shmoe::moe
