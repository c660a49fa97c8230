#!/usr/bin/env bash
# Two "hosts" on one machine: two network namespaces joined by a veth pair (10.77.0.1/24 and
# 10.77.0.2/24). The config store and PEs 0-1 run in the first, PEs 2-3 in the second; the two
# groups reach each other only through UCX over TCP on the veth link (UCX_TLS=tcp,self), the
# PEs of one namespace through shared memory. Runs PE tests and a MoE dispatch/combine
# verification that way.
#
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN); where namespaces cannot be made it prints
# "SKIPPED: <reason>" and exits 77, which CTest reports as skipped.
# Usage: run.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
shmoerun=$build/tools/shmoerun/shmoerun
moe=$build/tools/moe/shmoe-moe
src=$(cd "$(dirname "$0")/../.." && pwd)

source "$src/tests/netns/netns_lib.sh"
netns_setup

export UCX_TLS=tcp,self UCX_NET_DEVICES=$dev
export SHMEM_SYMMETRIC_SIZE=64M SHMOE_HANG_TIMEOUT=60 SHMOE_INIT_TIMEOUT=30
# The store and the two launchers of each job share the job's key.
SHMOE_JOB_KEY=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export SHMOE_JOB_KEY
out=$(mktemp -d)
failures=0
port=29500

# run_job NAME PROGRAM ARGS...: the store alone and PEs 0-1 in the first namespace, PEs 2-3 in
# the second.
run_job() {
  local name=$1
  shift
  port=$((port + 1))
  ip netns exec "$ns_a" "$shmoerun" --store-only -n 4 --bind 10.77.0.1 --port $port --timeout 150 \
    >"$out/$name.store" 2>&1 &
  local store=$!
  SHMOE_HOST_ID=netns-a ip netns exec "$ns_a" "$shmoerun" -n 2 --size 4 --store 10.77.0.1:$port \
    --prefix --timeout 150 "$@" >"$out/$name.a" 2>&1 &
  local a=$!
  SHMOE_HOST_ID=netns-b ip netns exec "$ns_b" "$shmoerun" -n 2 --size 4 --first-rank 2 \
    --store 10.77.0.1:$port --prefix --timeout 150 "$@" >"$out/$name.b" 2>&1
  local rc_b=$? rc_a rc_store
  wait $a
  rc_a=$?
  wait $store
  rc_store=$?
  if [[ $rc_a == 0 && $rc_b == 0 && $rc_store == 0 ]]; then
    echo "PASS: $name (4 PEs, 2 per namespace)"
  else
    echo "FAIL: $name: exit codes namespace A=$rc_a namespace B=$rc_b store=$rc_store"
    tail -n 20 "$out/$name.a" "$out/$name.b" "$out/$name.store"
    failures=$((failures + 1))
  fi
}

for t in test_rma test_amo test_sync test_heap test_locks; do
  run_job $t "$build/tests/pe/$t"
done
run_job moe_pipeline env SHMOE_MOE_PE=1 "$moe" pipeline --pes 4 --bs 24 --hidden 72 --topk 2 \
  --experts-per-pe 2 --dtype int32,bfloat16,float32 --drop 0.1 --iterations 10
grep -h "verify=" "$out/moe_pipeline.a" "$out/moe_pipeline.b" | head -n 4
run_job moe_doubleplane env SHMOE_MOE_PE=1 "$moe" pipeline --doubleplane --pes 4 --bs 32 \
  --hidden 128 --topk 2 --experts-per-pe 1 --dtype float32 --routing hot --threshold 4096
# Shrink mode: PE 2 (second namespace) is killed mid-iteration; with SHMOE_PE_LOSS=continue the
# store and both launchers let the others go on. Both launchers end with status 0 only if each
# survivor passed its checks (against a reference without the PEs it masked) and the lost PE
# died by a signal.
SHMOE_PE_LOSS=continue run_job moe_shrink_kill env SHMOE_MOE_PE=1 "$moe" pipeline --pes 4 \
  --bs 32 --hidden 1024 --topk 4 --experts-per-pe 2 --dtype bfloat16 --iterations 4 \
  --shrink-ms 2000 --fail-pe 2:kill:1

# The link really carried the traffic: bytes went out of the second namespace's veth end.
tx=$(ip netns exec "$ns_b" cat /sys/class/net/$dev/statistics/tx_bytes)
echo "bytes sent from the second namespace over $dev: $tx"
((tx > 1000000)) || {
  echo "FAIL: only $tx bytes crossed the veth link"
  failures=$((failures + 1))
}
rm -rf "$out"
((failures == 0)) || exit 1
echo "all network-namespace checks passed"
