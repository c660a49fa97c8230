#!/usr/bin/env bash
# shmem_global_exit(STATUS) on one PE while the others wait in a barrier: shmoerun must exit
# with STATUS, and so must every PE (checked by starting the PEs ourselves, as mpirun would, and
# waiting for each).
set -u
shmoerun=$1 prog=$2 n=$3 status=$4
fail=0

"$shmoerun" -n "$n" --timeout 60 "$prog" "$status"
got=$?
if ((got != status)); then
  echo "FAIL: shmoerun -n $n exited $got after shmem_global_exit($status), want $status"
  fail=1
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# Started without PMIx, the PEs need the job's key from us (as run_foreign.sh gives it).
SHMOE_JOB_KEY=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export SHMOE_JOB_KEY
pids=()
for ((r = 0; r < n; r++)); do
  env OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$n SHMOE_STORE=127.0.0.1:$port timeout 60 "$prog" "$status" &
  pids+=($!)
done
for ((r = 0; r < n; r++)); do
  wait "${pids[r]}"
  got=$?
  if ((got != status)); then
    echo "FAIL: PE $r exited $got after shmem_global_exit($status), want $status"
    fail=1
  fi
done
((fail == 0)) && echo "PASS: shmoerun and all $n PEs exited $status"
exit $fail
