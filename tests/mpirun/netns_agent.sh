#!/usr/bin/env bash
# mpirun's remote shell (plm_rsh_agent) for two_namespaces.sh: "netns_agent.sh HOST COMMAND..."
# runs COMMAND in the network namespace named HOST, as ssh would run it on host HOST.
# SHMOE_HOST_ID=HOST makes the PEs of each namespace a host of their own (they would otherwise
# share memory through the one /dev/shm of this machine).
# Each namespace's daemon keeps its Open MPI session directory under a folder of its own: on real
# hosts each has its own /tmp, but here all share this machine's, and the daemons of both
# namespaces and mpirun, all under this machine's one host name, racing to make the same
# /tmp/ompi.HOST.UID/jf.N/0 failed one run in CI ("mkdir ... File exists", orte_init failed).
# two_namespaces.sh removes these folders.
ns=$1
shift
session_base=/tmp/shmoe-ompi-$ns
mkdir -p "$session_base"
exec ip netns exec "$ns" env SHMOE_HOST_ID="$ns" OMPI_MCA_orte_tmpdir_base="$session_base" sh -c "$*"
