// The second data plane: an asynchronous copy engine (one thread per PE) that moves large
// segments while the workers carry on, like a DMA engine beside the cores. Control flags never
// travel through it: the caller quiets the engine before it raises a flag, so a flag can never
// overtake its data.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace shmoe::kernel {

struct RemoteCopy {
  void* dest;          // symmetric address (as on this PE)
  const void* source;  // local address
  std::size_t bytes;
  int pe;
  bool bypass_cache = false;  // non-temporal stores where the peer's heap is mapped here
};

// What the engine's quiet waits for: every copy complete where it went, or only the copies to
// PEs mapped here, the others merely sent, for a caller whose flags are held until their data
// lands (shrink mode: a PE stopped on another host completes nothing until it resumes).
enum class EngineQuiet { kEveryPe, kMappedPes };

class CopyEngine {
 public:
  explicit CopyEngine(EngineQuiet scope = EngineQuiet::kEveryPe);
  ~CopyEngine();
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;

  // Thread-safe. The copies of one call run in order; calls from several threads interleave.
  void submit(std::vector<RemoteCopy> copies);
  // Returns once every copy submitted so far is complete (as the scope says) and ordered before
  // the caller's later stores (the engine thread fences its own stores before it reports
  // completion). Its quiet covers only the PEs it wrote to (shmem_pe_quiet), so that it never
  // waits on another PE's traffic, such as flags held for a stopped PE.
  void quiet();
  std::size_t bytes_moved() const;

 private:
  void run();
  void note_written(int pe, bool mapped);  // under mutex_
  void quiet_written();                    // under mutex_, once idle

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::deque<RemoteCopy> queue_;
  std::size_t in_flight_ = 0;
  std::size_t bytes_moved_ = 0;
  bool stopping_ = false;
  const EngineQuiet scope_;
  std::vector<int> written_;         // PEs to quiet at the next idle, each once
  std::vector<bool> written_flags_;  // by PE: in written_
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace shmoe::kernel
