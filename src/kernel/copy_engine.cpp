#include "kernel/copy_engine.hpp"

#include <shmem.h>

#include <utility>

#include "common/streaming_copy.hpp"

namespace shmoe::kernel {

CopyEngine::CopyEngine() : thread_([this] { run(); }) {}

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
    try {
      void* mapped = c.bypass_cache ? shmem_ptr(c.dest, c.pe) : nullptr;
      if (mapped != nullptr) {
        copy_non_temporal(mapped, c.source, c.bytes);
      } else {
        shmem_putmem(c.dest, c.source, c.bytes, c.pe);
      }
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    bytes_moved_ += c.bytes;
    if (error && !error_) error_ = error;
    if (--in_flight_ == 0) {
      // Orders this thread's (possibly non-temporal) stores before whatever the waiter does next;
      // the quiet of a transport that stores nothing itself need not fence them.
      fence_non_temporal();
      shmem_quiet();
      idle_cv_.notify_all();
    }
  }
}

}  // namespace shmoe::kernel
