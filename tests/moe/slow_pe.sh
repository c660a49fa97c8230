#!/usr/bin/env bash
# The slow-PE report finds a PE made slow on purpose: PE SLOW sleeps DELAY_US before each timed
# dispatch + combine, and the report names it, prints the wait matrix and writes it as a CSV.
# The delay stands well above what time-sharing costs in CI (8 PEs on 2 cores beside other tests,
# under a sanitizer: a PE the scheduler leaves out costs the others 5 ms a call here, and a time
# slice is tens of ms); bench/slow_pe_bench.sh measures how often a delay of a few hundred
# microseconds is found.
#   slow_pe.sh SHMOE_MOE PES SLOW DELAY_US
set -euo pipefail
moe=$1 pes=$2 slow=$3 delay=$4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
log=$("$moe" pipeline --pes "$pes" --bs 8 --hidden 256 --topk 2 --experts-per-pe 2 \
  --dtype bfloat16 --perf --warmup 2 --loops 20 --delay-pe "$slow:$delay" --output-dir "$out" \
  --timeout 120 2>&1) || { echo "$log"; echo "FAIL: the run failed"; exit 1; }
echo "$log" | grep -A$((pes + 2)) "^waits:"
if ! grep -q "^slow PE: $slow (" <<<"$log"; then
  echo "FAIL: the report does not name PE $slow"
  exit 1
fi
csv=$(ls "$out"/pipeline_waits_pes"$pes"_*.csv)
rows=$(tail -n +2 "$csv" | awk -F, -v s="$slow" '$NF == s' | wc -l)
if [[ $rows -ne $((pes * pes)) ]]; then
  echo "FAIL: $csv has $rows rows naming PE $slow, expected $((pes * pes))"
  cat "$csv"
  exit 1
fi
echo "ok: PE $slow named, CSV $((pes * pes)) rows"
