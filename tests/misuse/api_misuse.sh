#!/usr/bin/env bash
# API misuse, as a user would get it wrong: api_misuse.sh SHMOERUN API_MISUSE. Each case checks
# the exit status, a message naming the call and the value, and that it took seconds (the hang
# timeout is 60 s, so a case that waited for it fails).
set -uo pipefail
shmoerun=$1 prog=$2
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# check NAME PES WANT_STATUS(0|nonzero) PATTERN... : runs the mode, greps every pattern.
check() {
  local mode=$1 pes=$2 want=$3
  shift 3
  local start=$SECONDS out status
  out=$(SHMOE_HANG_TIMEOUT=60 SHMEM_SYMMETRIC_SIZE=16M timeout 100 "$shmoerun" -n "$pes" "$prog" "$mode" 2>&1)
  status=$?
  local took=$((SECONDS - start))
  echo "--- $mode ($pes PEs): status $status in ${took} s"
  echo "$out" | head -20
  if [ "$want" = 0 ] && [ $status -ne 0 ]; then fail "$mode exited $status, want 0"; fi
  if [ "$want" != 0 ] && [ $status -eq 0 ]; then fail "$mode exited 0, want an error"; fi
  ((took < 30)) || fail "$mode took $took s: it waited instead of refusing"
  local p
  for p in "$@"; do
    grep -Eq -- "$p" <<<"$out" || fail "$mode: no line matches /$p/"
  done
}

check null_source 2 nonzero "shmem_long_put: source=NULL, but the call moves 32 bytes"
check null_dest_get 2 nonzero "shmem_long_get: dest=NULL, but the call moves 16 bytes"
check garbage_team 2 0 \
  "shmem_team_split_strided: parent_team=0x1234 is not a team handle" \
  "shmem_team_n_pes: team=0x5678 is not a team handle" \
  "PE 0: split=-1 invalid=1 n_pes=-1" "PE 1: split=-1 invalid=1 n_pes=-1"
check split_mismatch 4 0 \
  "shmem_team_split_strided: no team formed: the PEs of the parent team passed different arguments" \
  "PE 0: split=-1 invalid=1" "PE 1: split=-1 invalid=1" "PE 3: split=-1 invalid=1"
check bad_split 3 0 \
  "shmem_team_split_strided: no team formed: start=5 is out of range for a parent team of 3 PEs \(0\.\.2\)" \
  "shmem_team_split_strided: no team formed: another PE of the parent team passed arguments it refused" \
  "PE 0: split=-1 invalid=1" "PE 2: split=-1 invalid=1" \
  "PE 0: then split=0 size=3" "PE 2: then split=0 size=3"
check calloc_overflow 2 0 \
  "shmem_calloc: count=[0-9]+ times size=4 overflows size_t: returning NULL" \
  "PE 0: calloc=NULL" "PE 1: calloc=NULL"
check pe_quiet_huge 2 nonzero \
  "shmem_pe_quiet: npes=18446744073709551615 is out of range \(0\.\.4611686018427387903\)"
check put_count_wraps 2 nonzero \
  "shmem_long_put: nelems=2305843009213693953 is out of range \(0\.\.2305843009213693951\)"
check ibget_span_wraps 2 nonzero \
  "shmem_long_ibget: nblocks=64 is out of range \(0\.\.[0-9]+: blocks of 1 elements every 1152921504606846976"
check realloc_freed 2 0 \
  "shmem_realloc: ptr=0x[0-9a-f]+ is not a live block of the symmetric heap .*: returning NULL" \
  "PE 0: realloc=NULL" "PE 1: realloc=NULL"
check clear_unheld 2 nonzero \
  "shmem_clear_lock: this PE does not hold the lock at symmetric offset 0x[0-9a-f]+"
check set_twice 2 nonzero \
  "shmem_set_lock: this PE already holds the lock at symmetric offset 0x[0-9a-f]+ \(OpenSHMEM locks are not recursive"
check clear_by_other 2 nonzero "PE 1: .*shmem_clear_lock: this PE does not hold the lock"
check lock_ok 4 0 "PE 0: count=40 want=40"
check wait_null 2 nonzero "shmem_long_wait_until: ivars=NULL, but the call reads 1 element"
check test_all_null 2 nonzero "shmem_long_test_all: ivars=NULL, but the call reads 3 elements"
check garbage_ctx 2 nonzero "shmem_long_p: ctx=0xdeadbeef0 is not a live context"
check ctx_after_destroy 2 nonzero "shmem_ctx_quiet: ctx=0x[0-9a-f]+ is not a live context"
check ctx_destroy_twice 2 nonzero "shmem_ctx_destroy: ctx=0x[0-9a-f]+ is not a live context"
check destroy_default_ctx 2 nonzero "shmem_ctx_destroy: ctx=SHMEM_CTX_DEFAULT cannot be destroyed"
check ctx_ok 3 0 "PE 0: sum=6 want=6"
check reduce_past_heap 2 nonzero \
  "shmem_long_sum_reduce: dest=0x[0-9a-f]+ \(9223372036854775808 bytes\) is not symmetric: it runs past the end of the symmetric heap"
check reduce_to_stack 2 0 "shmem_long_sum_reduce: dest=0x[0-9a-f]+ is not symmetric \(OpenSHMEM requires a symmetric dest; shmoe accepts this one, and refuses it under SHMOE_DEBUG=1\); said once"
SHMOE_DEBUG=1 check reduce_to_stack 2 nonzero "shmem_long_sum_reduce: dest=0x[0-9a-f]+ \(16 bytes\) is not symmetric"
check ibput_short_stride 2 nonzero \
  "shmem_long_ibput: dst=2 is not a valid stride: it must be at least 3 \(elements, the block size\)"
check scan_partial_overlap 2 nonzero \
  "shmem_long_sum_inscan: dest=0x[0-9a-f]+ and source=0x[0-9a-f]+ overlap in part \(16 bytes each\): they must be the same array or disjoint"
check fcollect_overflow 2 nonzero "shmem_long_fcollect: nelems=[0-9]+ is out of range \\(0\\.\\.[0-9]+\\): [0-9]+ items of [0-9]+ bytes are more than"
# The costlier checks, under SHMOE_DEBUG=1: counts that differ between PEs are refused on every
# PE by the library's agreement; a stride that runs into the next allocation is refused by name.
# (Every PE reaches the verdict; the first to exit may end the others before they print it.)
SHMOE_DEBUG=1 check fcollect_counts_differ 3 nonzero \
  "PE [0-2]: .*shmem_long_fcollect: the PEs disagree on nelems \(bytes\) \(values from 8 to 16; this PE passed (8|16)\): every PE must pass the same"
SHMOE_DEBUG=1 check iput_past_allocation 2 nonzero \
  "shmem_long_iput: dest=0x[0-9a-f]+ \(56 bytes\) does not lie inside one live allocation"
SHMOE_DEBUG=1 check debug_ok 3 0 "PE 0: debug ok" "PE 2: debug ok"

echo "$failures failed"
exit $((failures > 0))
