// The variables torchrun gives its workers (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), given to the PEs too, so that a program written for torchrun
// (torch.distributed's env:// start, DeepEP's programs) runs under shmoerun unchanged.
#pragma once

#include <string>

namespace shmoe::tools {

struct TorchRendezvous {
  std::string addr;  // MASTER_ADDR; empty: the PEs get none (their own environment's, if any)
  std::string port;
};

// Where rank 0 hosts torch.distributed's store: MASTER_ADDR and MASTER_PORT of the launcher's
// environment where both are set; else, when this launcher starts the whole job, 127.0.0.1 and
// a port free now; else (PEs on other launchers) none, as only the user knows rank 0's address.
TorchRendezvous torch_rendezvous(bool whole_job);

// In a PE's process before exec: the rank variables (always: a PE is never another job's rank)
// and the rendezvous where there is one.
void set_torch_env(int rank, int job_size, int local_rank, int local_size,
                   const TorchRendezvous& rendezvous);

}  // namespace shmoe::tools
