// Host blocks of one size for a runtime's per-call results (received rows, combined tokens),
// reused once nothing holds them: a block of a decode shape is MiBs, and a fresh one per call
// faults its pages in again. Blocks of 2 MiB and more are 2 MiB aligned and asked for
// transparent huge pages.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

namespace shmoe::deep_ep {

class BlockPool : public std::enable_shared_from_this<BlockPool> {
 public:
  explicit BlockPool(std::size_t bytes) : bytes_(bytes) {}
  ~BlockPool() {
    for (std::byte* p : free_) std::free(p);
  }
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  std::size_t bytes() const { return bytes_; }

  // A block of bytes(): back to the pool when the last reference dies (freed if the pool is
  // gone by then).
  std::shared_ptr<std::byte[]> take() {
    std::byte* p = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        p = free_.back();
        free_.pop_back();
      }
    }
    if (p == nullptr) p = allocate();
    std::weak_ptr<BlockPool> pool = weak_from_this();
    return std::shared_ptr<std::byte[]>(p, [pool](std::byte* b) {
      if (auto owner = pool.lock()) {
        owner->give(b);
      } else {
        std::free(b);
      }
    });
  }

 private:
  static constexpr std::size_t kKeep = 3;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  void give(std::byte* b) {
    {
      std::lock_guard lock(mutex_);
      if (free_.size() < kKeep) {
        free_.push_back(b);
        return;
      }
    }
    std::free(b);
  }

  std::byte* allocate() const {
    void* p = nullptr;
    if (bytes_ >= kHugePage) {
      const std::size_t rounded = (bytes_ + kHugePage - 1) / kHugePage * kHugePage;
      p = std::aligned_alloc(kHugePage, rounded);
      if (p != nullptr) (void)madvise(p, rounded, MADV_HUGEPAGE);  // a hint; fine if refused
    } else {
      p = std::malloc(bytes_ == 0 ? 1 : bytes_);
    }
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<std::byte*>(p);
  }

  std::size_t bytes_;
  std::mutex mutex_;
  std::vector<std::byte*> free_;
};

// A pool per block size, made at first use (a runtime's few sizes).
class BlockPools {
 public:
  std::shared_ptr<std::byte[]> take(std::size_t bytes) {
    for (auto& p : pools_) {
      if (p->bytes() == bytes) return p->take();
    }
    if (pools_.size() >= kSizes) pools_.erase(pools_.begin());
    pools_.push_back(std::make_shared<BlockPool>(bytes));
    return pools_.back()->take();
  }

 private:
  static constexpr std::size_t kSizes = 8;
  std::vector<std::shared_ptr<BlockPool>> pools_;
};

}  // namespace shmoe::deep_ep
