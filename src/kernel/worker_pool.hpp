// "Device" kernels on CPU cores: an operator runs SPMD on a pool of worker threads that lives as
// long as the PE. Workers come in two kinds, like Ascend's AIC/AIV cores or a GPU's tensor-core
// and CUDA-core warps: matrix workers (GEMMs) and vector workers (data movement, element-wise
// work). Every worker knows its id, its kind and the counts, can wait on the others at a barrier,
// and calls SHMEM functions directly (the runtime is initialised with SHMEM_THREAD_MULTIPLE).
#pragma once

#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace shmoe::kernel {

enum class WorkerKind : std::uint8_t { kMatrix, kVector };

struct WorkerCounts {
  int matrix = 0;
  int vector = 1;
  int total() const { return matrix + vector; }
};

// The cores this PE can fairly use when `pes_on_host` PEs share the machine, split 1:2 between
// matrix and vector workers (at least one vector worker).
WorkerCounts default_worker_counts(int pes_on_host);

class WorkerPool;

// What a kernel sees of itself. Worker ids: matrix workers 0..M-1, vector workers M..M+V-1.
class KernelContext {
 public:
  int worker_id() const { return id_; }
  int worker_count() const { return counts_.total(); }
  WorkerKind kind() const {
    return id_ < counts_.matrix ? WorkerKind::kMatrix : WorkerKind::kVector;
  }
  // Index among the workers of the same kind, and their number.
  int kind_id() const { return kind() == WorkerKind::kMatrix ? id_ : id_ - counts_.matrix; }
  int kind_count() const { return kind() == WorkerKind::kMatrix ? counts_.matrix : counts_.vector; }
  const WorkerCounts& counts() const { return counts_; }
  // Every worker of this launch waits here until all have arrived.
  void barrier();

 private:
  friend class WorkerPool;
  KernelContext(int id, WorkerCounts counts, std::barrier<>* b)
      : id_(id), counts_(counts), barrier_(b) {}
  int id_;
  WorkerCounts counts_;
  std::barrier<>* barrier_;
};

using Kernel = std::function<void(KernelContext&)>;

class WorkerPool {
 public:
  // Threads are created once, for the largest counts used; launches may use fewer.
  explicit WorkerPool(int max_workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int max_workers() const { return static_cast<int>(threads_.size()); }

  // Runs `kernel` on counts.total() workers and returns when all have finished (a launch of one
  // worker runs it on the calling thread). The first exception a worker throws is rethrown here
  // (after every worker has finished).
  // Not re-entrant: one launch at a time per pool.
  void launch(const WorkerCounts& counts, const Kernel& kernel);

  // Seconds each worker spent in the last launch (its own clock, start to end of the kernel).
  const std::vector<double>& last_worker_seconds() const { return seconds_; }

 private:
  void worker_main(int id);

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  std::uint64_t generation_ = 0;
  int active_ = 0;
  int running_ = 0;
  bool stopping_ = false;
  const Kernel* kernel_ = nullptr;
  WorkerCounts counts_;
  std::unique_ptr<std::barrier<>> barrier_;
  std::vector<double> seconds_;
  std::exception_ptr error_;
};

}  // namespace shmoe::kernel
