#!/usr/bin/env bash
# A job of 4 PEs started as two groups, as on two hosts (SHMOE_HOST_ID hostA and hostB, so the
# groups talk over UCX): with the store run alone (shmoerun --store-only) and with the store run
# by the first group; a PE of the second group that dies, and one group that never comes, must
# be reported by name by the other group; a store alone whose PEs never come stops at its
# --start-timeout, naming them.
# Usage: two_groups.sh SHMOERUN PE_FAULTS
set -uo pipefail
shmoerun=$1
pe_faults=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
export SHMEM_SYMMETRIC_SIZE=16M SHMOE_HANG_TIMEOUT=30
# Launchers that share a store need the job's key; one for all the jobs below (each has its
# own port).
SHMOE_JOB_KEY=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export SHMOE_JOB_KEY

echo "== store alone, two groups of 2 PEs"
port=$(free_port)
"$shmoerun" --store-only -n 4 --port "$port" --timeout 60 >"$out/store.log" 2>&1 &
store=$!
SHMOE_HOST_ID=hostA "$shmoerun" -n 2 --size 4 --store "127.0.0.1:$port" --timeout 60 "$pe_faults" ok >"$out/a.log" 2>&1 &
a=$!
SHMOE_HOST_ID=hostB "$shmoerun" -n 2 --size 4 --first-rank 2 --store "127.0.0.1:$port" --timeout 60 "$pe_faults" ok >"$out/b.log" 2>&1
rc_b=$?
wait $a; rc_a=$?
wait $store; rc_store=$?
[[ $rc_a == 0 && $rc_b == 0 && $rc_store == 0 ]] || fail "exit codes group A=$rc_a group B=$rc_b store=$rc_store (want 0 0 0)"
for pe in 0 1 2 3; do
  grep -q "pe=$pe$" "$out/a.log" "$out/b.log" || fail "PE $pe never ran"
done
grep -q "listening on" "$out/store.log" || fail "the store did not say where it listens"

echo "== store in the first group; PE 3 on the second host is killed"
port=$(free_port)
SHMOE_HOST_ID=hostA "$shmoerun" -n 2 --size 4 --port "$port" --timeout 60 "$pe_faults" kill9_last >"$out/a.log" 2>&1 &
a=$!
SHMOE_HOST_ID=hostB "$shmoerun" -n 2 --size 4 --first-rank 2 --store "127.0.0.1:$port" --timeout 60 "$pe_faults" kill9_last >"$out/b.log" 2>&1
rc_b=$?
wait $a; rc_a=$?
[[ $rc_a != 0 ]] || fail "group A exited 0 although PE 3 died"
[[ $rc_b == 137 ]] || fail "group B exited $rc_b, want 137 (its PE 3 was killed by signal 9)"
grep -Eq "job aborted: PE 3 \(pid [0-9]+ on hostB\) disconnected without finalizing" "$out/a.log" ||
  fail "group A does not name PE 3 on hostB: $(cat "$out/a.log")"

echo "== a store alone whose PEs never come stops at --start-timeout"
start=$SECONDS
"$shmoerun" --store-only -n 3 --start-timeout 1 --timeout 60 >"$out/store.log" 2>&1
rc=$?
[[ $rc == 124 ]] || fail "the store alone exited $rc without PEs, want 124"
((SECONDS - start <= 10)) || fail "the store alone took $((SECONDS - start)) s to give up, want ~1"
grep -q "PEs 0, 1, 2 did not come within --start-timeout 1.0 s" "$out/store.log" ||
  fail "the store alone does not name PEs 0, 1, 2: $(cat "$out/store.log")"
"$shmoerun" -n 1 --start-timeout 1 "$pe_faults" ok >"$out/a.log" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -q -- "--start-timeout is for --store-only" "$out/a.log" ||
  fail "--start-timeout without --store-only: exit $rc, $(cat "$out/a.log")"

echo "== the second group never comes"
port=$(free_port)
SHMOE_INIT_TIMEOUT=3 SHMOE_HOST_ID=hostA "$shmoerun" -n 2 --size 4 --port "$port" --timeout 60 "$pe_faults" ok >"$out/a.log" 2>&1
rc_a=$?
[[ $rc_a != 0 ]] || fail "group A exited 0 without PEs 2 and 3"
grep -q "PEs 2, 3" "$out/a.log" || fail "group A does not name the missing PEs 2, 3: $(cat "$out/a.log")"

# two_groups_expect NAME REGEX ENV_A ENV_B: both groups fail and group A's output matches REGEX.
two_groups_expect() {
  local name=$1 regex=$2 env_a=$3 env_b=$4
  echo "== $name"
  port=$(free_port)
  env SHMOE_HOST_ID=hostA $env_a "$shmoerun" -n 2 --size 4 --port "$port" --timeout 60 "$pe_faults" ok >"$out/a.log" 2>&1 &
  a=$!
  env SHMOE_HOST_ID=hostB $env_b "$shmoerun" -n 2 --size 4 --first-rank 2 --store "127.0.0.1:$port" --timeout 60 "$pe_faults" ok >"$out/b.log" 2>&1
  rc_b=$?
  wait $a; rc_a=$?
  [[ $rc_a != 0 && $rc_b != 0 ]] || fail "$name: exit codes A=$rc_a B=$rc_b, want both non-zero"
  grep -Eq "$regex" "$out/a.log" || fail "$name: group A does not say '$regex': $(cat "$out/a.log")"
}
two_groups_expect "SHMOE_TRANSPORT=shm across hosts is refused" \
  "SHMOE_TRANSPORT=shm, but PE 0 runs on host 'hostA' and PE 2 on 'hostB'" SHMOE_TRANSPORT=shm SHMOE_TRANSPORT=shm
two_groups_expect "PEs that disagree on SHMOE_TRANSPORT are refused" \
  "PE [0-3] has SHMOE_TRANSPORT=(ucx|auto) but PE [0-3] has SHMOE_TRANSPORT=(auto|ucx): set the same value for every PE" \
  SHMOE_TRANSPORT=auto SHMOE_TRANSPORT=ucx
two_groups_expect "a bad SHMOE_TRANSPORT is named" \
  "SHMOE_TRANSPORT=bogus is not one of the accepted values: auto, shm, ucx" SHMOE_TRANSPORT=bogus SHMOE_TRANSPORT=bogus

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all two-group launch checks passed"
