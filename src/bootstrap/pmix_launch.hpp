// A process started by a PMIx server (Open MPI's mpirun, Slurm's srun --mpi=pmix, PRRTE's
// prterun): the server tells it its rank and the job's size, and passes values between the
// processes of the job. PEs started that way learn from PE 0, through the server, where PE 0
// runs the config store, so that no variable of ours has to be set.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

namespace shmoe::bootstrap {

class PmixClient {
 public:
  // Whether the environment names a PMIx server that started this process (PMIX_NAMESPACE,
  // PMIX_RANK and a PMIX_SERVER_URI* variable). Without one, PMIx_Init is never called: it would
  // look for a system server, which is slow and not what a shmoerun or singleton start wants.
  static bool started_by_server();

  // The process's one client, made on first use and finalized at exit. A job that calls
  // shmem_init again after shmem_finalize keeps its connection: a client that finalizes and
  // connects again can find its next fence failed with PARTIAL_SUCCESS, the server still
  // counting the old connection among the participants. A failed start is not kept.
  static std::shared_ptr<PmixClient> for_this_process();
  // Drops the process's hold on that client, for a process about to _exit: the client finalizes
  // once its last holder lets go.
  static void release_for_this_process();

  // PMIx_Init. Throws shmoe::Error with PMIx's reason.
  PmixClient();
  ~PmixClient();  // PMIx_Finalize: the launcher counts a process that exits without it as failed
  PmixClient(const PmixClient&) = delete;
  PmixClient& operator=(const PmixClient&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Processes of this job on this host.
  int local_size() const { return local_size_; }

  // Collective over every process of the job: rank 0 publishes `value` under `key`, and every
  // process returns rank 0's value (what the other ranks pass is ignored). Each call needs a key
  // of its own. Throws shmoe::Error naming the step that failed, or after `timeout`.
  std::string broadcast_from_rank0(std::string_view key, const std::string& value,
                                   std::chrono::milliseconds timeout);

 private:
  struct Impl;  // keeps pmix.h away from the includers
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int size_ = 1;
  int local_size_ = 1;
};

}  // namespace shmoe::bootstrap
