#!/usr/bin/env bash
# mpirun's remote shell (plm_rsh_agent) for two_namespaces.sh: "netns_agent.sh HOST COMMAND..."
# runs COMMAND in the network namespace named HOST, as ssh would run it on host HOST.
# SHMOE_HOST_ID=HOST makes the PEs of each namespace a host of their own (they would otherwise
# share memory through the one /dev/shm of this machine).
ns=$1
shift
exec ip netns exec "$ns" env SHMOE_HOST_ID="$ns" sh -c "$*"
