#!/usr/bin/env bash
# compare_oshmem.sh - run bench/shmem_bench.c on shmoe and on Open MPI's OSHMEM, print one table.
#
# usage: bench/compare_oshmem.sh [BUILD_DIR | SHMOE_BENCH SHMOERUN] [-- SHMEM_BENCH_ARGS...]
#
#   BUILD_DIR     shmoe CMake build dir; uses BUILD_DIR/bench/shmem_bench and
#                 BUILD_DIR/tools/shmoerun/shmoerun (default: <repo>/build)
#   SHMOE_BENCH SHMOERUN   the two paths given directly
#   after --      arguments for shmem_bench at $NP PEs instead of "all", e.g. -- -M 1M put get
#
# The OSHMEM binary is built from the same source with oshcc into the work dir. When oshcc or
# oshrun is missing only shmoe runs; when the shmoe binary or launcher is missing only OSHMEM
# runs. Each implementation runs the selected benchmarks at $NP PEs, then "barrier" at each
# PE count in $BARRIER_NPS (oversubscribed when that exceeds the cores).
#
# Environment:
#   NP=2                      PEs for the main run
#   BARRIER_NPS="4 8"         extra PE counts for the barrier benchmark ("" for none)
#   SHMEM_SYMMETRIC_SIZE=512M symmetric heap per PE (the 64 MiB transfers need 2 x 64 MiB)
#   RUN_TIMEOUT=300           seconds before a single launch is killed
#   WORK_DIR=<mktemp -d>      where the OSHMEM build, the CSVs and the logs go (kept)
#   OSHRUN_ARGS, SHMOERUN_ARGS  extra launcher flags, e.g. OSHRUN_ARGS="--bind-to none"
#
# Open MPI flags used, and why:
#   --mca osc ucx        without it Debian's Open MPI 4.1 crashes in shmem_finalize
#   --oversubscribe      lets 4 and 8 PEs run on a 2-core machine
#   --allow-run-as-root  only when running as root (containers)
# Deliberately NOT used: --mca btl ^openib. With Debian's Open MPI 4.1.4 it made OSHMEM's
# ping-pong ~4x and barrier ~7x slower (1.1 vs 0.30 us, 3.7 vs 0.53 us at 2 PEs), while the
# default and "--mca btl vader,self" are equally fast. The default printed no openib warning.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
src="$here/shmem_bench.c"

NP=${NP:-2}
BARRIER_NPS=${BARRIER_NPS-4 8}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
export SHMEM_SYMMETRIC_SIZE=${SHMEM_SYMMETRIC_SIZE:-512M}
WORK_DIR=${WORK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/shmem_bench.XXXXXX")}
mkdir -p "$WORK_DIR"

note() { echo "compare_oshmem: $*" >&2; }

# ---- arguments --------------------------------------------------------------------------------
positional=()
while (($#)); do
    if [[ $1 == -- ]]; then
        shift
        break
    fi
    positional+=("$1")
    shift
done
bench_args=("$@")
((${#bench_args[@]})) || bench_args=(all)

case ${#positional[@]} in
0) shmoe_bench="$repo/build/bench/shmem_bench"
   shmoerun="$repo/build/tools/shmoerun/shmoerun" ;;
1) shmoe_bench="${positional[0]}/bench/shmem_bench"
   shmoerun="${positional[0]}/tools/shmoerun/shmoerun" ;;
2) shmoe_bench=${positional[0]}
   shmoerun=${positional[1]} ;;
*) sed -n '2,14s/^# \{0,1\}//p' "$0" >&2
   exit 2 ;;
esac

# ---- launchers: "launch_<impl> NP ARGS..." runs shmem_bench with a timeout -------------------
oshrun_flags=(--oversubscribe --mca osc ucx)
[[ $(id -u) == 0 ]] && oshrun_flags+=(--allow-run-as-root)
read -r -a oshrun_extra <<<"${OSHRUN_ARGS:-}"
read -r -a shmoerun_extra <<<"${SHMOERUN_ARGS:-}"

launch_oshmem() {
    local np=$1
    shift
    timeout -k 10 "$RUN_TIMEOUT" oshrun "${oshrun_flags[@]}" "${oshrun_extra[@]}" -np "$np" \
        "$WORK_DIR/oshmem/shmem_bench" "$@"
}

launch_shmoe() {
    local np=$1
    shift
    timeout -k 10 "$RUN_TIMEOUT" "$shmoerun" "${shmoerun_extra[@]}" -n "$np" "$shmoe_bench" "$@"
}

# Appends header-less CSV rows to $csv; a failed launch is reported, and what it printed kept.
run_one() {
    local impl=$1 csv=$2 np=$3
    shift 3
    note "$impl: $np PEs: shmem_bench $*"
    if ! "launch_$impl" "$np" -H "$@" >>"$csv" 2>>"${csv%.csv}.log"; then
        note "$impl: run at $np PEs failed; see ${csv%.csv}.log"
    fi
}

run_suite() {
    local impl=$1 csv="$WORK_DIR/$1.csv" np
    : >"$csv"
    run_one "$impl" "$csv" "$NP" "${bench_args[@]}"
    for np in $BARRIER_NPS; do
        run_one "$impl" "$csv" "$np" barrier
    done
}

# ---- OSHMEM -----------------------------------------------------------------------------------
have_oshmem=0
if command -v oshcc >/dev/null && command -v oshrun >/dev/null; then
    mkdir -p "$WORK_DIR/oshmem"
    # Same flags as bench/CMakeLists.txt gives the shmoe build.
    oshcc -O2 -std=c11 -Wall -Wextra -DIMPL_NAME=oshmem "$src" -o "$WORK_DIR/oshmem/shmem_bench"
    have_oshmem=1
else
    note "oshcc/oshrun not found: Open MPI's OSHMEM is not installed; showing shmoe only"
fi

# ---- shmoe ------------------------------------------------------------------------------------
have_shmoe=0
if [[ -x $shmoe_bench && -x $shmoerun ]]; then
    have_shmoe=1
else
    note "shmoe binaries not found ($shmoe_bench, $shmoerun); showing OSHMEM only"
fi

((have_oshmem || have_shmoe)) || { note "nothing to run"; exit 1; }
((have_shmoe)) && run_suite shmoe
((have_oshmem)) && run_suite oshmem

# ---- merge ------------------------------------------------------------------------------------
inputs=()
((have_shmoe)) && inputs+=(shmoe "$WORK_DIR/shmoe.csv")
((have_oshmem)) && inputs+=(oshmem "$WORK_DIR/oshmem.csv")

python3 - "${inputs[@]}" <<'PY'
"""Joins the per-implementation CSVs on (bench, pes, bytes) and prints one table.

Bandwidth rows (memcpy, *_bw) show GB/s, higher is better; the others show microseconds per
operation, lower is better. "shmoe/oshmem" is the ratio of the shown values; the summary
gives per benchmark the geometric mean of the speed-up (>1: shmoe faster).
"""
import csv
import math
import sys

args = sys.argv[1:]
impls = args[0::2]
rows = {}   # (bench, pes, bytes) -> {impl: row}
order = []  # keys in order of first appearance

for impl, path in zip(impls, args[1::2]):
    with open(path, newline="") as f:
        for r in csv.reader(f):
            if len(r) != 8 or r[0] == "impl":
                continue
            key = (r[1], int(r[2]), int(r[3]))
            if key not in rows:
                rows[key] = {}
                order.append(key)
            rows[key][impl] = r


def is_bw(bench):
    return bench == "memcpy" or bench.endswith("_bw")


def value(r, bw):
    """GB/s for bandwidth rows, usec per op otherwise; None when missing."""
    field = r[6] if bw else r[5]
    return float(field) if field else None


def human(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def fmt(v, spec=".4g"):
    return "-" if v is None else format(v, spec)


head = ["bench", "pes", "bytes", "unit"] + impls
if len(impls) == 2:
    head.append(f"{impls[0]}/{impls[1]}")
head += [f"{i}/memcpy" for i in impls]
table = [head]
speedups = {}  # bench -> list of (shmoe speed / oshmem speed)

for key in order:
    bench, pes, nbytes = key
    bw = is_bw(bench)
    vals = [value(rows[key][i], bw) if i in rows[key] else None for i in impls]
    ratios = [float(rows[key][i][7]) if i in rows[key] and rows[key][i][7] else None
              for i in impls]
    line = [bench, str(pes), human(nbytes), "GB/s" if bw else "us"]
    line += [fmt(v) for v in vals]
    if len(impls) == 2:
        a, b = vals
        rel = a / b if a is not None and b else None
        line.append(fmt(rel, ".3f"))
        if rel:
            speed = rel if bw else 1 / rel
            speedups.setdefault((bench, pes), []).append(speed)
    line += [fmt(r, ".3f") for r in ratios]
    table.append(line)

widths = [max(len(row[c]) for row in table) for c in range(len(head))]
for row in table:
    print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                    for i, (c, w) in enumerate(zip(row, widths))))

print("\nGB/s: higher is better; us (per op): lower is better. x/memcpy: rate relative to a")
print("single-thread memcpy of the same size measured in the same run (1.0 = memcpy speed).")
if speedups:
    print(f"\nspeed-up {impls[0]} over {impls[1]} (geometric mean over sizes; >1: "
          f"{impls[0]} faster):")
    for (bench, pes), s in speedups.items():
        g = math.exp(sum(math.log(x) for x in s) / len(s))
        sizes = f"{len(s)} size" + ("s" if len(s) > 1 else "")
        print(f"  {bench:<12} {pes:>2} PEs  {g:7.3f}   ({sizes})")
PY

note "CSVs and logs in $WORK_DIR"
