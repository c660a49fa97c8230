#!/usr/bin/env bash
# Starts PROGRAM as N PEs the way Open MPI's mpirun and Slurm's srun do (their rank and size
# variables, no shmoerun), with PE 0 hosting the config store at SHMOE_STORE and every PE given
# the job's key in SHMOE_JOB_KEY, as the recipe in docs/openshmem.md says. Half the PEs get
# Open MPI's variables and half Slurm's, which the runtime must both understand.
set -u
prog=$1 n=$2
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
SHMOE_JOB_KEY=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export SHMOE_JOB_KEY
pids=()
for ((r = 0; r < n; r++)); do
  if ((r % 2 == 0)); then
    env OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$n SHMOE_STORE=127.0.0.1:$port "$prog" &
  else
    env SLURM_PROCID=$r SLURM_NTASKS=$n SHMOE_STORE=127.0.0.1:$port "$prog" &
  fi
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
