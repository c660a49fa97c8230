// Host blocks of one size, reused: results of hundreds of KiB to tens of MiB per call, which a
// fresh allocation would fault in page by page at every call (it made dispatch several times
// slower). Blocks of 2 MiB and more are 2 MiB aligned and asked for transparent huge pages, as
// NumPy asks for its large arrays: copying rows through 4 KiB pages cost a quarter more at
// prefill sizes.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

namespace shmoe::common {

// Host memory for one block, freed with std::free.
struct FreeBlock {
  void operator()(std::byte* p) const { std::free(p); }
};
using BlockMemory = std::unique_ptr<std::byte, FreeBlock>;

class BlockPool {
 public:
  explicit BlockPool(std::size_t bytes) : bytes_(bytes) {}
  std::size_t bytes() const { return bytes_; }
  BlockMemory take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) return allocate();
    auto b = std::move(free_.back());
    free_.pop_back();
    return b;
  }
  void give(BlockMemory b) {
    std::lock_guard lock(mutex_);
    if (free_.size() < kKeep) free_.push_back(std::move(b));
  }

 private:
  static constexpr std::size_t kKeep = 3;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  BlockMemory allocate() const {
    void* p = nullptr;
    if (bytes_ >= kHugePage) {
      const std::size_t rounded = (bytes_ + kHugePage - 1) / kHugePage * kHugePage;
      p = std::aligned_alloc(kHugePage, rounded);
      if (p != nullptr) (void)madvise(p, rounded, MADV_HUGEPAGE);  // a hint; fine if refused
    } else {
      p = std::malloc(bytes_ == 0 ? 1 : bytes_);
    }
    if (p == nullptr) throw std::bad_alloc();
    return BlockMemory(static_cast<std::byte*>(p));
  }

  std::size_t bytes_;
  std::mutex mutex_;
  std::vector<BlockMemory> free_;
};

}  // namespace shmoe::common
