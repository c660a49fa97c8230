#!/usr/bin/env bash
# How reliably the slow-PE report finds a PE that is late by a few hundred microseconds a call,
# and how often it names a PE when none is late: RUNS runs of `shmoe-moe pipeline --perf` at 2, 4
# and 8 PEs with `--delay-pe LAST:DELAY_US`, and as many without, counting the verdicts.
#   bench/slow_pe_bench.sh [BUILD_DIR] [RUNS (20)] [DELAY_US (300)]
set -euo pipefail
build=${1:-build}
runs=${2:-20}
delay=${3:-300}
moe="$build/tools/moe/shmoe-moe"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
shape=(--bs 16 --hidden 1024 --topk 4 --experts-per-pe 2 --dtype bfloat16)
echo "# $(uptime)"
printf '%4s %9s %22s %22s\n' pes delay_us "delayed PE named" "no delay: none named"
for pes in 2 4 8; do
  slow=$((pes - 1)) named=0 quiet=0
  for ((r = 0; r < runs; ++r)); do
    "$moe" pipeline --pes "$pes" "${shape[@]}" --perf --warmup 3 --loops 50 \
      --delay-pe "$slow:$delay" --output-dir "$out" >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
    grep -q "^slow PE: $slow (" "$out/log" && named=$((named + 1))
    "$moe" pipeline --pes "$pes" "${shape[@]}" --perf --warmup 3 --loops 50 \
      --output-dir "$out" >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
    grep -q "^slow PE: none" "$out/log" && quiet=$((quiet + 1))
  done
  printf '%4s %9s %16s of %2s %16s of %2s\n' "$pes" "$delay" "$named" "$runs" "$quiet" "$runs"
done
echo "shape: ${shape[*]}; each run: 3 warm-up and 50 timed dispatch + combine calls"
echo "# $(uptime)"
