#!/bin/sh
# Runs one PE as if its host were "fakehost<rank / PES_PER_HOST>", so that a one-machine job
# has several hosts: PEs of one fake host share memory, the others talk over UCX.
# Usage (as shmoerun's program): fake_hosts.sh PES_PER_HOST PROGRAM ARGS...
set -eu
per_host=$1
shift
SHMOE_HOST_ID="fakehost$((SHMOE_RANK / per_host))"
export SHMOE_HOST_ID
exec "$@"
