#!/usr/bin/env bash
# Jobs started by Open MPI's mpirun the way users start them: no shmoerun and no variable of ours,
# so the PEs bootstrap through mpirun's PMIx server. One check per call:
#   mpirun_checks.sh BUILD_DIR ring N        ring_put at N PEs: every PE got its neighbour's data
#   mpirun_checks.sh BUILD_DIR rendezvous N  what each PE learned: rank, size, store, job key
#   mpirun_checks.sh BUILD_DIR store_given   an explicit SHMOE_STORE is still honoured
#   mpirun_checks.sh BUILD_DIR suite PROGRAM N [LINE]   a PE program (tests/pe) at N PEs, which
#                                                   must print LINE (default: PASSED)
#   mpirun_checks.sh BUILD_DIR killed        a killed PE is named, the job ends, nothing leaks
#   mpirun_checks.sh BUILD_DIR global_exit   shmem_global_exit's status is the job's
#   mpirun_checks.sh BUILD_DIR fallback      without a usable PMIx server (no mpirun involved)
# A missing mpirun is a failure: scripts/install-deps.sh installs openmpi-bin.
set -uo pipefail
build=$(cd "$1" && pwd)
check=$2
shift 2

fail() {
  echo "FAIL: $*"
  exit 1
}

command -v mpirun >/dev/null || fail "mpirun is not installed (scripts/install-deps.sh installs openmpi-bin)"
for var in $(compgen -e); do
  if [[ $var == SHMOE_* ]]; then unset "$var"; fi
done
# CI containers run as root, which mpirun refuses without these; 4 PEs on 2 cores oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export SHMEM_SYMMETRIC_SIZE=${SHMEM_SYMMETRIC_SIZE:-64M}

out=""
status=0
# job LIMIT_S MPIRUN_ARGS...: runs mpirun, leaving its output in $out and its exit code in
# $status; one that outlives LIMIT_S fails the check.
job() {
  local limit=$1
  shift
  local start=$SECONDS
  echo "+ mpirun --oversubscribe $*"
  out=$(timeout -k 5 "$limit" mpirun --oversubscribe "$@" 2>&1)
  status=$?
  echo "$out"
  ((SECONDS - start < limit)) || fail "mpirun did not end within $limit s"
}

expect_line() {
  grep -Eq "$1" <<<"$out" || fail "no line matches /$1/"
}

# ring N: each PE put (its PE, index) codes into its right neighbour's shmem_malloc'd array.
check_ring() {
  local n=$1
  job 60 -np "$n" "$build/tests/mpirun/ring_put"
  ((status == 0)) || fail "exit code $status"
  for ((pe = 0; pe < n; pe++)); do
    expect_line "^PE $pe of $n: received 4096 values from PE $(((pe + n - 1) % n))\$"
  done
}

# The probe lines of the last job: rank=R size=N launcher=L hosts_store=H store=S job_key=K.
# Every rank once; all agree on size, store and job key; only PE 0 hosts the store.
check_probe_lines() {
  local n=$1 store=$2
  local lines
  lines=$(grep -E '^rank=' <<<"$out" | sort -t= -k2 -n)
  (($(wc -l <<<"$lines") == n)) || fail "expected $n probe lines"
  local keys
  keys=$(sed -E 's/.* job_key=//' <<<"$lines" | sort -u)
  [[ $(wc -l <<<"$keys") == 1 ]] || fail "the PEs got different job keys: $keys"
  [[ $keys =~ ^[0-9a-f]{32}$ ]] || fail "job key '$keys' is not 32 hex digits"
  job_key=$keys
  for ((pe = 0; pe < n; pe++)); do
    local hosts=$((pe == 0 ? 1 : 0))
    grep -qx "rank=$pe size=$n launcher=Open MPI (PMIx) hosts_store=$hosts store=$store job_key=$keys" \
      <<<"$lines" || fail "PE $pe: expected size=$n hosts_store=$hosts store=$store"
  done
}

# rendezvous N: all PEs run on this host, so PE 0's store listens on loopback (the probe
# announces port 4242), and each job gets a key of its own.
check_rendezvous() {
  local n=$1
  job 60 -np "$n" "$build/tests/mpirun/launch_probe"
  ((status == 0)) || fail "exit code $status"
  check_probe_lines "$n" 127.0.0.1:4242
  local first=$job_key
  job 60 -np "$n" "$build/tests/mpirun/launch_probe"
  check_probe_lines "$n" 127.0.0.1:4242
  [[ $job_key != "$first" ]] || fail "two jobs got the same key $job_key"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# store_given: SHMOE_STORE still says where PE 0 runs the store; PMIx still gives the key.
check_store_given() {
  local port
  port=$(free_port)
  job 60 -np 3 -x SHMOE_STORE=127.0.0.1:"$port" "$build/tests/mpirun/launch_probe"
  ((status == 0)) || fail "exit code $status"
  check_probe_lines 3 127.0.0.1:"$port"
  port=$(free_port)
  job 60 -np 3 -x SHMOE_STORE=127.0.0.1:"$port" "$build/tests/mpirun/ring_put"
  ((status == 0)) || fail "exit code $status"
  expect_line "^PE 2 of 3: received 4096 values from PE 1\$"
  job 60 -np 2 -x SHMOE_STORE=nowhere "$build/tests/mpirun/ring_put"
  ((status != 0)) || fail "a malformed SHMOE_STORE was accepted"
  expect_line "SHMOE_STORE 'nowhere' is invalid"
}

check_suite() {
  local program=$1 n=$2 passed=${3:-PASSED}
  job 240 -np "$n" "$build/tests/pe/$program"
  ((status == 0)) || fail "exit code $status"
  expect_line "$passed"
}

# killed: PE 1 dies at once (kill9) or while the others wait for it in a barrier (kill9_last,
# PE 2 of 3). The job ends with an error within seconds, the dead PE is named, and no shared
# memory object of the job survives it. The other PEs name it as soon as PE 0's store sees its
# connection close, but mpirun may kill them first: then mpirun's own notice names it.
check_killed() {
  local mode dead
  for mode in kill9 kill9_last; do
    dead=$([[ $mode == kill9 ]] && echo 1 || echo 2)
    job 20 -np 3 "$build/tests/launcher/pe_faults" "$mode"
    ((status != 0)) || fail "$mode: the job succeeded"
    local ours="job aborted: PE $dead \\(pid [0-9]+ on [^)]+\\) disconnected without finalizing"
    local mpiruns="process rank $dead with PID [0-9]+ on node [^ ]+ exited on signal 9"
    expect_line "($ours|$mpiruns)"
    local pid
    while read -r pid; do
      ! compgen -G "/dev/shm/shmoe-$pid-*" >/dev/null || fail "/dev/shm/shmoe-$pid-* leaked"
    done < <(grep -Eo 'pid=[0-9]+' <<<"$out" | cut -d= -f2)
  done
}

# global_exit: the job ends with the status PE 1 gave shmem_global_exit, and a lone PE that
# leaves with shmem_global_exit(0) has left PMIx properly (mpirun fails a job otherwise).
check_global_exit() {
  job 20 -np 3 "$build/tests/launcher/pe_faults" global_exit
  ((status == 7)) || fail "exit code $status, not 7"
  expect_line "PE 1 called shmem_global_exit\\(7\\)"
  job 20 -np 1 "$build/tests/launcher/pe_faults" global_exit0
  ((status == 0)) || fail "exit code $status, not 0"
}

# fallback: what decides the launch when PMIx is not usable. PMIX_* variables naming a server
# that is not there make PMIx_Init fail at once.
check_fallback() {
  local probe=$build/tests/mpirun/launch_probe
  local dead_server=(PMIX_NAMESPACE=gone PMIX_RANK=0 "PMIX_SERVER_URI4=gone.0;tcp4://127.0.0.1:1")
  run_probe() {
    echo "+ $*"
    out=$(timeout 20 env "$@" 2>&1)
    status=$?
    echo "$out"
  }
  # Open MPI's variables take over, with a warning; a lone PE makes up its own key.
  run_probe "${dead_server[@]}" OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 "$probe"
  ((status == 0)) || fail "exit code $status"
  expect_line "^rank=0 size=1 launcher=Open MPI hosts_store=1 store=127.0.0.1:4242 job_key=[0-9a-f]{32}\$"
  expect_line "warning: a PMIx server started this process, but PMIx_Init\\(\\) failed"
  # More than one PE and no SHMOE_STORE: the error says why PMIx did not do.
  run_probe "${dead_server[@]}" OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 "$probe"
  ((status != 0)) || fail "started without a store address"
  expect_line "SHMOE_STORE is not set and PMIx failed \\(PMIx_Init\\(\\) failed"
  # Nothing else to go by: an error, not N singleton jobs.
  run_probe "${dead_server[@]}" "$probe"
  ((status != 0)) || fail "ran as a singleton"
  expect_line "a PMIx server started this process, but PMIx_Init\\(\\) failed"
  # shmoerun's variables win over whatever started shmoerun, without touching PMIx.
  local key=mpirun-checks-job-key-0123456789abcdef
  run_probe "${dead_server[@]}" SHMOE_RANK=1 SHMOE_SIZE=2 SHMOE_STORE=127.0.0.1:7 \
    SHMOE_JOB_KEY=$key "$probe"
  ((status == 0)) || fail "exit code $status"
  expect_line "^rank=1 size=2 launcher=shmoerun hosts_store=0 store=127.0.0.1:7 job_key=$key\$"
  ! grep -q "PMIx" <<<"$out" || fail "shmoerun's PE tried PMIx"
  # Outside PMIx, a PE of several has no way to learn a key: it must be given one.
  run_probe "${dead_server[@]}" OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 \
    SHMOE_STORE=127.0.0.1:7 "$probe"
  ((status != 0)) || fail "a PE joined a store without the job key"
  expect_line "with SHMOE_STORE, but SHMOE_JOB_KEY is not set"
}

case $check in
  ring) check_ring "$1" ;;
  rendezvous) check_rendezvous "$1" ;;
  store_given) check_store_given ;;
  suite) check_suite "$@" ;;
  killed) check_killed ;;
  global_exit) check_global_exit ;;
  fallback) check_fallback ;;
  *) fail "unknown check '$check'" ;;
esac
echo "PASS: $check $*"
