#!/usr/bin/env bash
# Attacks on a running job's config store, with real processes. Two jobs run security_victim
# (data exchanged between PEs and checked, a pause at DIR/ready until DIR/go, a second checked
# exchange): one under shmoerun --port, one started by hand with the SHMOE_STORE recipe. While
# each pauses:
#  * a stranger (this user without the key; user nobody too when run as root) tries to read,
#    write, abort, join with a taken rank or a wrong size, with the old hello or a forged proof,
#    with garbage and with a huge frame (store_intruder);
#  * a second job is started on the same store address, and one without a key;
#  * under shmoerun, a process with the key writes ten 60 MiB values (the store's total limit
#    must stop it and keep the launcher's memory bounded).
# Every attempt must be refused cleanly (a refusal that says why, then the connection closed),
# and each job must then finish with every PE's data verified. Prints the cases tried, those
# refused cleanly and how long refusals took.
# Usage: security_checks.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
shmoerun=$build/tools/shmoerun/shmoerun
victim=$build/tests/security/security_victim
intruder=$build/tests/security/store_intruder
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
for var in $(compgen -e); do
  if [[ $var == SHMOE_* ]]; then unset "$var"; fi
done
export SHMEM_SYMMETRIC_SIZE=16M SHMOE_INIT_TIMEOUT=20

failures=0
tried=0
refused=0
times=()
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
new_key() { od -An -tx1 -N16 /dev/urandom | tr -d ' \n'; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
now_ms() { date +%s%3N; }
wait_for_file() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    [[ -e $1 ]] && return 0
    sleep 0.1
  done
  return 1
}

# What the store must say to each stranger case.
declare -A expect=(
  [read-before-hello]="before the hello that proves the job key"
  [write-before-hello]="before the hello that proves the job key"
  [abort-before-hello]="before the hello that proves the job key"
  [status-before-hello]="before the hello that proves the job key"
  [old-hello-bad-size]="protocol version 1 is not supported"
  [old-hello-dup-rank]="protocol version 1 is not supported"
  [forged-tool-read]="did not prove the key of job [0-9a-f]{12}"
  [forged-dup-rank-then-abort]="did not prove the key of job [0-9a-f]{12}"
  [forged-bad-size]="did not prove the key of job [0-9a-f]{12}"
  [other-job]="belongs to job [0-9a-f]{12}, but this config store serves job [0-9a-f]{12}"
  [garbage]="bad frame magic"
  [huge-frame]="exceeds the limit of 16384"
)

# A stranger as another user: nobody, when this runs as root and nobody can run the intruder.
as_nobody=()
nobody_skip=""
if ((EUID != 0)); then
  nobody_skip="not running as root, so no process of another user can be started"
elif ! command -v setpriv >/dev/null; then
  nobody_skip="setpriv (util-linux) is not installed"
else
  as_nobody=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --)
  if ! "${as_nobody[@]}" test -x "$intruder"; then
    nobody_skip="user nobody cannot run $intruder (a directory above it is not searchable)"
    as_nobody=()
  fi
fi

# stranger STORE WHO CASES... [-- PREFIX...]: each case once, without the key.
stranger() {
  local store=$1 who=$2
  shift 2
  local cases=() prefix=()
  while (($# > 0)) && [[ $1 != -- ]]; do
    cases+=("$1")
    shift
  done
  (($# > 0)) && shift && prefix=("$@")
  local c line rc
  for c in "${cases[@]}"; do
    tried=$((tried + 1))
    line=$("${prefix[@]}" env -u SHMOE_JOB_KEY "$intruder" "$store" "$c" 2>&1)
    rc=$?
    echo "  [$who] $line"
    local ms=""
    [[ $line =~ outcome=refused\ ms=([0-9.]+) ]] && ms=${BASH_REMATCH[1]}
    if ((rc == 0)) && [[ -n $ms && $line =~ ${expect[$c]} ]]; then
      refused=$((refused + 1))
      times+=("$ms")
    else
      fail "$who, $c: not refused cleanly with /${expect[$c]}/"
    fi
  done
}

# refused_job NAME REGEX LIMIT_S COMMAND...: a second job that must fail, saying REGEX, fast.
refused_job() {
  local name=$1 regex=$2 limit=$3
  shift 3
  tried=$((tried + 1))
  local t0 out rc ms
  t0=$(now_ms)
  out=$(timeout -k 2 "$limit" "$@" 2>&1)
  rc=$?
  ms=$(($(now_ms) - t0))
  if ((rc != 0 && rc != 124)) && grep -Eq "$regex" <<<"$out"; then
    refused=$((refused + 1))
    times+=("$ms")
    echo "  [$name] refused in $ms ms: $(grep -Eo "$regex" <<<"$out" | head -n 1)"
  else
    fail "$name: exit $rc after $ms ms, without /$regex/: $out"
  fi
}

# check_victim NAME N LOG...: every PE of a job of N verified both phases, nothing aborted it.
check_victim() {
  local name=$1 n=$2 pe
  shift 2
  for ((pe = 0; pe < n; pe++)); do
    for phase in 1 2; do
      grep -Eq "PE $pe of $n: phase $phase verified from PE [0-9]+" "$@" ||
        fail "$name: PE $pe did not verify phase $phase"
    done
  done
  ! grep -q "intruder was here\|job aborted" "$@" || fail "$name: the job was disturbed: $(cat "$@")"
}

mapfile -t all_cases < <(printf '%s\n' "${!expect[@]}" | sort)

echo "== job 1: shmoerun -n 4 --port P, under attack"
port=$(free_port)
store=127.0.0.1:$port
key=$(new_key)
mkdir "$work/job1"
# (Under AddressSanitizer, freed memory waits in a quarantine of 256 MiB, which would count as
# the launcher's; a small one keeps the measure about the store.)
SHMOE_JOB_KEY=$key SHMOE_STORE_MAX_TOTAL=128M ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8 \
  "$shmoerun" -n 4 --port "$port" --timeout 120 "$victim" "$work/job1" >"$work/job1.log" 2>&1 &
launcher=$!
pids+=("$launcher")
wait_for_file "$work/job1/ready" 60 || fail "job 1 did not start: $(cat "$work/job1.log")"

stranger "$store" "this user, no key" "${all_cases[@]}"
if ((${#as_nobody[@]} > 0)); then
  stranger "$store" "user nobody" "${all_cases[@]}" -- "${as_nobody[@]}"
else
  echo "  SKIP: a stranger of another user: $nobody_skip"
fi
refused_job "second job, same store, other key" \
  "belongs to job [0-9a-f]{12}, but this config store serves job [0-9a-f]{12}" 30 \
  env SHMOE_JOB_KEY="$(new_key)" "$shmoerun" -n 2 --size 4 --first-rank 2 --store "$store" \
  --timeout 30 "$victim" "$work/job1"
refused_job "second job, same port" "cannot listen on 127.0.0.1:$port: Address already in use" 30 \
  env SHMOE_JOB_KEY="$(new_key)" "$shmoerun" -n 4 --port "$port" --timeout 30 "$victim" "$work/job1"
refused_job "second job, same store, no key" "they need one job key" 30 \
  "$shmoerun" -n 2 --size 4 --first-rank 2 --store "$store" --timeout 30 "$victim" "$work/job1"

# With the key, ten 60 MiB values: the total limit (128M here) stops them.
rss_mb() { awk '/^VmRSS/ {print int($2 / 1024)}' "/proc/$1/status"; }
before=$(rss_mb "$launcher")
tried=$((tried + 1))
line=$(SHMOE_JOB_KEY=$key "$intruder" "$store" insider-flood 2>&1)
after=$(rss_mb "$launcher")
echo "  [with the key] $line; launcher memory ${before} -> ${after} MiB"
if [[ $line =~ outcome=refused\ stored=2\ .*over\ its\ limit\ of\ 134217728\ bytes ]] &&
  ((after - before < 256)); then
  refused=$((refused + 1))
else
  fail "the store's total limit did not hold (want 2 values stored, under 256 MiB more memory)"
fi

touch "$work/job1/go"
wait "$launcher"
rc=$?
((rc == 0)) || fail "job 1 exited $rc: $(cat "$work/job1.log")"
check_victim "job 1" 4 "$work/job1.log"

echo "== job 2: 3 PEs started by hand with SHMOE_STORE and SHMOE_JOB_KEY, under attack"
port=$(free_port)
store=127.0.0.1:$port
key=$(new_key)
mkdir "$work/job2"
job2=()
for r in 0 1 2; do
  env OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=3 SHMOE_STORE="$store" SHMOE_JOB_KEY="$key" \
    "$victim" "$work/job2" >"$work/job2.$r.log" 2>&1 &
  job2+=($!)
  pids+=($!)
done
wait_for_file "$work/job2/ready" 60 || fail "job 2 did not start: $(cat "$work"/job2.*.log)"
stranger "$store" "this user, no key" abort-before-hello forged-dup-rank-then-abort \
  old-hello-dup-rank other-job
# docs/openshmem.md's recipe run twice on one address: PE 0 cannot listen, the others are refused.
other=$(new_key)
for r in 0 1 2; do
  regex="belongs to job [0-9a-f]{12}, but this config store serves job [0-9a-f]{12}"
  ((r == 0)) && regex="cannot listen on 127.0.0.1:$port: Address already in use"
  refused_job "second job, same SHMOE_STORE, PE $r" "$regex" 30 \
    env OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=3 SHMOE_STORE="$store" \
    SHMOE_JOB_KEY="$other" "$victim" "$work/job2"
done
refused_job "second job, same SHMOE_STORE, no key" "with SHMOE_STORE, but SHMOE_JOB_KEY is not set" 30 \
  env OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=3 SHMOE_STORE="$store" "$victim" "$work/job2"
touch "$work/job2/go"
for p in "${job2[@]}"; do
  wait "$p" || fail "a PE of job 2 failed: $(cat "$work"/job2.*.log)"
done
check_victim "job 2" 3 "$work"/job2.*.log

slowest=$(printf '%s\n' "${times[@]}" | sort -g | tail -n 1)
median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
echo "security: $tried cases tried, $refused refused cleanly; time to refuse: median $median ms," \
  "slowest $slowest ms (second jobs: the whole start-up)"
if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "both jobs finished with every PE's data verified"
