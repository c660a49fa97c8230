// Where a PE learns its rank, the job size and the store address: from shmoerun, a PMIx server
// (Open MPI's mpirun, Slurm's srun --mpi=pmix), the variables of Open MPI, Slurm or a PMI
// launcher (MPICH/Hydra) together with SHMOE_STORE, or nothing (a singleton job of one PE).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "bootstrap/config_store.hpp"
#include "bootstrap/job_key.hpp"

namespace shmoe::bootstrap {

class PmixClient;

struct LaunchInfo {
  int rank = 0;
  int size = 1;
  // Where the store is; when this PE hosts it, where it binds (port 0: any free port). Under PMIx
  // without SHMOE_STORE the other PEs learn it from PE 0 in rendezvous().
  StoreAddress store;
  bool hosts_store = false;  // this PE runs the store (PE 0 outside shmoerun; singletons)
  // "shmoerun", "Open MPI (PMIx)", "Slurm (PMIx)", "PMIx", "Open MPI", "Slurm", "PMI", "singleton"
  std::string launcher;
  // The job's secret (job_key.hpp), the same in every PE: shmoerun's SHMOE_JOB_KEY; under
  // PMIx, made by PE 0 (or SHMOE_JOB_KEY there) and learned by the others in rendezvous();
  // under other launchers, the SHMOE_JOB_KEY the user gave every PE; made up by a singleton.
  JobKey job_key;
  // The PMIx server that started this PE, if any; PMIx ends (PMIx_Finalize) with the last copy.
  std::shared_ptr<PmixClient> pmix;
  bool store_from_pe0 = false;  // the store address comes from PE 0 through PMIx
};

// Why a PE of this launch lost the store, naming who runs it: shmoerun, a store apart from the
// PEs (shmoe_init_joining), or PE 0 (every other launcher's store is PE 0's).
std::string store_loss_reason(const LaunchInfo& launch);

// Throws shmoe::Error naming the variables when they are inconsistent or incomplete (a job of
// several PEs outside PMIx without SHMOE_JOB_KEY among them).
LaunchInfo detect_launch();

// A start that another framework arranged (shmoe_init_from, shmoe_init_joining): the next
// detect_launch() returns this rank, size, store and key instead of reading a launcher's
// variables. The store is rank 0's with `pe0_hosts_store`, else one already running apart.
// Throws shmoe::Error naming the argument that is out of range or malformed.
void give_launch(int rank, int size, std::string_view store, std::string_view job_key,
                 bool pe0_hosts_store);

// Every PE calls this before it connects to the store, PE 0 after its store (if it hosts one)
// listens on `hosted_port`. Under PMIx, PE 0 tells the others where the store is and hands out
// the job key (waiting for at most `timeout`); elsewhere the address is known already. Fills in
// launch.store (the address to connect to) and launch.job_key.
void rendezvous(LaunchInfo& launch, std::uint16_t hosted_port, std::chrono::milliseconds timeout);

}  // namespace shmoe::bootstrap
