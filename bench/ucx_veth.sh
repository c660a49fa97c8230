#!/usr/bin/env bash
# ucx_veth.sh - put latency and bandwidth between two "hosts" joined by a veth pair (two network
# namespaces, UCX over TCP), through shmoe and through Open MPI's OSHMEM, with the same
# bench/shmem_bench.c source and one PE in each namespace.
#
# usage (as root): [BASELINE=DIR] bench/ucx_veth.sh [BUILD_DIR] [-- SHMEM_BENCH_ARGS...]
#   default arguments: -m 8 -M 4M -f 4 -t 0.2 put_lat pingpong put_bw get_bw rate
#   BASELINE: a directory with the shmem_bench and shmoerun of another shmoe (an older revision),
#   run the same way as a third column, "before"
# Prints "SKIPPED: reason" and exits 77 where network namespaces cannot be made.
#
# OSHMEM is started by oshrun in the first namespace; its daemon for the second "host"
# (10.77.0.2) is started through an rsh agent that enters the second namespace instead of ssh.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
build=$repo/build
if (($#)) && [[ $1 != -- ]]; then
  build=$(cd "$1" && pwd)
  shift
fi
[[ ${1:-} == -- ]] && shift
bench_args=("$@")
((${#bench_args[@]})) || bench_args=(-m 8 -M 4M -f 4 -t 0.2 put_lat pingpong put_bw get_bw rate)

source "$repo/tests/netns/netns_lib.sh"
netns_setup
work=$(mktemp -d "${TMPDIR:-/tmp}/ucx_veth.XXXXXX")
export UCX_TLS=tcp,self UCX_NET_DEVICES=$dev
export SHMEM_SYMMETRIC_SIZE=64M
# The store and the launchers of a job share the job's key.
SHMOE_JOB_KEY=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export SHMOE_JOB_KEY

# ---- shmoe: the store and PE 0 in the first namespace, PE 1 in the second --------------------
port=29600
# run_shmoe IMPL SHMOERUN SHMEM_BENCH: one run, its CSV in $work/IMPL.csv.
run_shmoe() {
  local impl=$1 shmoerun=$2 bench=$3
  port=$((port + 1))
  ip netns exec "$ns_a" "$shmoerun" --store-only -n 2 --bind 10.77.0.1 --port $port --timeout 300 \
    >"$work/$impl.store.log" 2>&1 &
  local store=$!
  SHMOE_HOST_ID=netns-a ip netns exec "$ns_a" "$shmoerun" -n 1 --size 2 --store 10.77.0.1:$port \
    --timeout 300 "$bench" -i "$impl" "${bench_args[@]}" >"$work/$impl.csv" 2>"$work/$impl.log" &
  local pe0=$!
  SHMOE_HOST_ID=netns-b ip netns exec "$ns_b" "$shmoerun" -n 1 --size 2 --first-rank 1 \
    --store 10.77.0.1:$port --timeout 300 "$bench" -i "$impl" "${bench_args[@]}" \
    >/dev/null 2>>"$work/$impl.log"
  wait $pe0 || echo "ucx_veth: the $impl run failed; see $work/$impl.log" >&2
  wait $store
}
impls=()
if [[ -n ${BASELINE:-} ]]; then
  run_shmoe before "$BASELINE/shmoerun" "$BASELINE/shmem_bench"
  impls+=(before)
fi
run_shmoe shmoe "$build/tools/shmoerun/shmoerun" "$build/bench/shmem_bench"
impls+=(shmoe)

# ---- OSHMEM -----------------------------------------------------------------------------------
if command -v oshcc >/dev/null && command -v oshrun >/dev/null; then
  oshcc -O2 -std=c11 -DIMPL_NAME=oshmem "$here/shmem_bench.c" -o "$work/shmem_bench_oshmem"
  cat >"$work/rsh_agent.sh" <<AGENT
#!/bin/sh
# Started by oshrun as "rsh_agent.sh HOST COMMAND...": runs COMMAND in HOST's namespace.
host=\$1
shift
case \$host in
10.77.0.2) exec ip netns exec $ns_b sh -c "\$*" ;;
*) exec sh -c "\$*" ;;
esac
AGENT
  chmod +x "$work/rsh_agent.sh"
  printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' >"$work/hosts"
  timeout -k 10 300 ip netns exec "$ns_a" oshrun --allow-run-as-root -np 2 \
    --hostfile "$work/hosts" --map-by node \
    --mca plm_rsh_agent "$work/rsh_agent.sh" --mca osc ucx \
    --mca oob_tcp_if_include $dev --mca btl_tcp_if_include $dev \
    -x UCX_TLS -x UCX_NET_DEVICES -x SHMEM_SYMMETRIC_SIZE \
    "$work/shmem_bench_oshmem" -H "${bench_args[@]}" >"$work/oshmem.csv" 2>"$work/oshmem.log" ||
    echo "ucx_veth: the OSHMEM run failed; see $work/oshmem.log" >&2
else
  echo "ucx_veth: oshcc/oshrun not found; shmoe only" >&2
  : >"$work/oshmem.csv"
fi
impls+=(oshmem)

# ---- one table ----------------------------------------------------------------------------------
python3 - "$work" "${impls[@]}" <<'PY'
import csv, os, sys
work, impls = sys.argv[1], sys.argv[2:]
rows = {}
for impl in impls:
    with open(os.path.join(work, impl + ".csv"), newline="") as f:
        for r in csv.reader(f):
            if len(r) != 8 or r[0] == "impl":
                continue
            rows.setdefault((r[1], int(r[3])), {})[impl] = r
print(f"{'bench':<12} {'bytes':>9} " + " ".join(f"{i:>12}" for i in impls) + "  unit")
for (bench, nbytes), found in sorted(rows.items()):
    bw = bench.endswith("_bw")
    def val(impl):
        r = found.get(impl)
        if r is None or not (r[6] if bw else r[5]):
            return "-"
        return f"{float(r[6] if bw else r[5]):.4g}"
    print(f"{bench:<12} {nbytes:>9} " + " ".join(f"{val(i):>12}" for i in impls) +
          f"  {'GB/s' if bw else 'us/op'}")
PY
echo "CSVs and logs in $work"
