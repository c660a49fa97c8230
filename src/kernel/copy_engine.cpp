#include "kernel/copy_engine.hpp"

#include <shmem.h>

#include <utility>

#include "common/streaming_copy.hpp"

namespace shmoe::kernel {

CopyEngine::CopyEngine(EngineQuiet scope) : scope_(scope), thread_([this] { run(); }) {}

CopyEngine::~CopyEngine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void CopyEngine::submit(std::vector<RemoteCopy> copies) {
  if (copies.empty()) return;
  {
    std::lock_guard lock(mutex_);
    for (auto& c : copies) queue_.push_back(c);
    in_flight_ += copies.size();
  }
  work_cv_.notify_one();
}

void CopyEngine::quiet() {
  std::unique_lock lock(mutex_);
  idle_cv_.wait(lock, [this] { return in_flight_ == 0; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

std::size_t CopyEngine::bytes_moved() const {
  std::lock_guard lock(mutex_);
  return bytes_moved_;
}

void CopyEngine::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    RemoteCopy c = queue_.front();
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    bool at_mapped = false;
    try {
      void* mapped = shmem_ptr(c.dest, c.pe);
      at_mapped = mapped != nullptr;
      if (mapped != nullptr && c.bypass_cache) {
        copy_non_temporal(mapped, c.source, c.bytes);
      } else {
        shmem_putmem(c.dest, c.source, c.bytes, c.pe);
      }
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    note_written(c.pe, at_mapped);
    bytes_moved_ += c.bytes;
    if (error && !error_) error_ = error;
    if (--in_flight_ == 0) {
      // Orders this thread's (possibly non-temporal) stores before whatever the waiter does next;
      // the quiet of a transport that stores nothing itself need not fence them.
      fence_non_temporal();
      quiet_written();
      idle_cv_.notify_all();
    }
  }
}

void CopyEngine::note_written(int pe, bool mapped) {
  if (scope_ == EngineQuiet::kMappedPes && !mapped) return;  // its flag is held until it lands
  if (static_cast<std::size_t>(pe) >= written_flags_.size())
    written_flags_.resize(static_cast<std::size_t>(pe) + 1, false);
  if (written_flags_[static_cast<std::size_t>(pe)]) return;
  written_flags_[static_cast<std::size_t>(pe)] = true;
  written_.push_back(pe);
}

void CopyEngine::quiet_written() {
  try {
    shmem_pe_quiet(written_.data(), written_.size());
  } catch (...) {
    if (!error_) error_ = std::current_exception();
  }
  for (int pe : written_) written_flags_[static_cast<std::size_t>(pe)] = false;
  written_.clear();
}

}  // namespace shmoe::kernel
