// Where a PE learns its rank, the job size and the store address: from shmoerun, Open MPI's
// mpirun, Slurm's srun, a PMI launcher (MPICH/Hydra), or nothing (a singleton job of one PE).
#pragma once

#include <optional>
#include <string>

#include "bootstrap/config_store.hpp"

namespace shmoe::bootstrap {

struct LaunchInfo {
  int rank = 0;
  int size = 1;
  StoreAddress store;        // where the store is (or will be, when this PE hosts it)
  bool hosts_store = false;  // this PE runs the store (PE 0 outside shmoerun; singletons)
  std::string launcher;      // "shmoerun", "Open MPI", "Slurm", "PMI", "singleton"
};

// Throws shmoe::Error naming the variables when they are inconsistent or incomplete.
LaunchInfo detect_launch();

}  // namespace shmoe::bootstrap
