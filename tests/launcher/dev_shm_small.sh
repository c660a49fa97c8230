#!/usr/bin/env bash
# Symmetric heaps that /dev/shm cannot hold: refused at shmem_init, naming /dev/shm's free space,
# SHMEM_SYMMETRIC_SIZE and the PEs of the host; and a page that /dev/shm cannot supply later
# (another user filled it) ends the PE with a message naming /dev/shm, not a bare SIGBUS.
# A 64 MiB tmpfs is mounted over /dev/shm in a private mount namespace (needs root, or
# CAP_SYS_ADMIN); where that is not allowed the test is skipped (exit 77), saying why.
# Usage: dev_shm_small.sh SHMOERUN PE_FAULTS
set -uo pipefail
if [[ "${1:-}" != --inside ]]; then
  if ! why=$(unshare -m --propagation private true 2>&1); then
    echo "SKIP: cannot make a private mount namespace with unshare -m: $why"
    exit 77
  fi
  exec unshare -m --propagation private "$0" --inside "$@"
fi
shmoerun=$2
pe_faults=$3
if ! why=$(mount -t tmpfs -o size=64M shmoe-test-shm /dev/shm 2>&1); then
  echo "SKIP: cannot mount a small tmpfs over /dev/shm: $why"
  exit 77
fi
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# expect NAME STATUS PATTERN OUTPUT
expect() {
  local name=$1 want=$2 pattern=$3 status=$4 out=$5
  if [[ $status != "$want" ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    fail "$name: status $status (want $want), expected /$pattern/ in:"
    echo "$out" | head -20
  else
    echo "ok: $name"
  fi
}

# The default heap (512 MiB) for 2 PEs in 64 MiB: refused before any heap segment exists. The
# other PE, further on, may hold a page or two there by then (seen under ASan: 63.9 MiB free).
start=$SECONDS
out=$(timeout 60 "$shmoerun" -n 2 "$pe_faults" ok 2>&1)
expect "default heaps refused" 1 \
  "shmem_init failed: the symmetric heaps of the 2 PEs on this host need 1\.0 GiB in /dev/shm \(2 x 51[0-9]\.[0-9] MiB: SHMEM_SYMMETRIC_SIZE \(unset: 512\.0 MiB\) .*\), but /dev/shm has only 6[34]\.[0-9] MiB free \(of 64\.0 MiB\): lower SHMEM_SYMMETRIC_SIZE to at most [0-9]+M" \
  $? "$out"
((SECONDS - start < 20)) || fail "the refusal took $((SECONDS - start)) s"
grep -q "Bus error" <<<"$out" && fail "the refusal came as a bus error"
leftover=$(ls /dev/shm)
[[ -z $leftover ]] || fail "/dev/shm holds $leftover after the refusal"
# The advice holds: the largest size it suggests runs.
suggested=$(grep -oE "lower SHMEM_SYMMETRIC_SIZE to at most [0-9]+M" <<<"$out" | head -1 | grep -oE "[0-9]+M")
out=$(SHMEM_SYMMETRIC_SIZE=$suggested timeout 60 "$shmoerun" -n 2 "$pe_faults" ok 2>&1)
expect "the suggested SHMEM_SYMMETRIC_SIZE=$suggested runs" 0 "pid=[0-9]+ pe=1" $? "$out"

out=$(SMA_SYMMETRIC_SIZE=40M timeout 60 "$shmoerun" -n 2 "$pe_faults" ok 2>&1)
expect "the old variable is named" 1 "2 x [0-9.]+ MiB: SMA_SYMMETRIC_SIZE=40M .*lower SMA_SYMMETRIC_SIZE" $? "$out"

# /dev/shm filled after start-up: the first touch of a heap page that cannot come.
out=$(SHMEM_SYMMETRIC_SIZE=32M timeout 60 "$shmoerun" -n 1 "$pe_faults" fill_dev_shm 2>&1)
expect "a page /dev/shm cannot supply" 135 \
  "PE 0: error: bus error at 0x[0-9a-f]+ in the shared-memory segment /dev/shm/shmoe-[0-9]+-0 .*: /dev/shm could not supply the page \(0 MiB free of 64 MiB\)\. .*lower SHMEM_SYMMETRIC_SIZE" \
  $? "$out"
grep -q "filled /dev/shm: 0" <<<"$out" || fail "the filler did not take /dev/shm's space: $out"
((failures == 0))
