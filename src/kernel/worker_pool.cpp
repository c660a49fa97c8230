#include "kernel/worker_pool.hpp"

#include <sched.h>

#include <algorithm>
#include <stdexcept>

namespace shmoe::kernel {

WorkerCounts default_worker_counts(int pes_on_host) {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  int fair = std::max(1, cores / std::max(1, pes_on_host));
  WorkerCounts c;
  c.matrix = fair / 3;
  c.vector = std::max(1, fair - c.matrix);
  return c;
}

void KernelContext::barrier() {
  barrier_->arrive_and_wait();
}

WorkerPool::WorkerPool(int max_workers) {
  if (max_workers < 1) throw std::invalid_argument("WorkerPool needs at least one worker");
  seconds_.assign(max_workers, 0.0);
  for (int id = 0; id < max_workers; ++id) threads_.emplace_back([this, id] { worker_main(id); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::launch(const WorkerCounts& counts, const Kernel& kernel) {
  if (counts.matrix < 0 || counts.vector < 0 || counts.total() < 1 ||
      counts.total() > max_workers()) {
    throw std::invalid_argument("worker counts " + std::to_string(counts.matrix) + " matrix + " +
                                std::to_string(counts.vector) + " vector are outside 1.." +
                                std::to_string(max_workers()) + " workers in all");
  }
  if (counts.total() == 1) {
    // One worker: the calling thread is it. Handing the kernel to a pool thread and waiting for
    // it to finish costs two wake-ups (tens of microseconds in a VM) and overlaps nothing.
    std::barrier<> alone(1);
    KernelContext ctx(0, counts, &alone);
    const auto t0 = std::chrono::steady_clock::now();
    auto record = [&] {
      seconds_[0] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    try {
      kernel(ctx);
    } catch (...) {
      record();
      throw;
    }
    record();
    return;
  }
  std::unique_lock lock(mutex_);
  counts_ = counts;
  active_ = counts.total();
  running_ = active_;
  kernel_ = &kernel;
  error_ = nullptr;
  barrier_ = std::make_unique<std::barrier<>>(active_);
  ++generation_;
  start_cv_.notify_all();
  done_cv_.wait(lock, [this] { return running_ == 0; });
  kernel_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void WorkerPool::worker_main(int id) {
  std::uint64_t seen = 0;
  for (;;) {
    const Kernel* kernel;
    WorkerCounts counts;
    std::barrier<>* b;
    {
      std::unique_lock lock(mutex_);
      start_cv_.wait(lock, [&] { return stopping_ || (generation_ != seen && id < active_); });
      if (stopping_) return;
      seen = generation_;
      kernel = kernel_;
      counts = counts_;
      b = barrier_.get();
    }
    KernelContext ctx(id, counts, b);
    auto t0 = std::chrono::steady_clock::now();
    std::exception_ptr error;
    try {
      (*kernel)(ctx);
    } catch (...) {
      error = std::current_exception();
      // The others may wait for this worker at a barrier: leave it for good.
      b->arrive_and_drop();
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    {
      std::lock_guard lock(mutex_);
      seconds_[id] = s;
      if (error && !error_) error_ = error;
      if (--running_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace shmoe::kernel
