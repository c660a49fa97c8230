#!/usr/bin/env bash
# What shrink mode (elastic EP) costs a decode-shape dispatch + combine (128 tokens per PE,
# hidden 7168, top-8, 8 experts per PE, bf16) when no PE fails: the pipeline's time with
# --shrink-ms (bounded waits, a PE mask on every call, fixed receive slots, a combine that reads
# rows where they lie) against the same run without it, measured back to back in this run, in
# both of the tool's layouts: rows read in the receive window (shrink mode: in their fixed
# slots), and --copy-out (buffers of the caller's own; shrink mode then compacts the rows).
#   bench/shrink_bench.sh [BUILD_DIR] [PES] [RUNS]
# Prints each run's times and the medians' ratios; the slowest worker of any PE, per call.
set -euo pipefail
build=${1:-build} pes=${2:-2} runs=${3:-5}
moe="$build/tools/moe/shmoe-moe"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
shape=(pipeline --pes "$pes" --bs 128 --hidden 7168 --topk 8 --experts-per-pe 8
       --dtype bfloat16 --perf --warmup 5 --loops 40 --output-dir "$out" --seed 7)
time_of() {  # the full_op time_max of one run, in us
  "$moe" "${shape[@]}" "$@" | sed -n 's/^perf: .* full_op .* time_max=\([0-9.]*\) us.*/\1/p'
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
declare -a window shrink_window copy shrink_copy
echo "run,window_us,shrink_window_us,copy_out_us,shrink_copy_out_us   (load $(cut -d' ' -f1-3 /proc/loadavg))"
for ((r = 0; r < runs; ++r)); do
  window[r]=$(time_of)
  shrink_window[r]=$(time_of --shrink-ms 10000)
  copy[r]=$(time_of --copy-out)
  shrink_copy[r]=$(time_of --copy-out --shrink-ms 10000)
  echo "$r,${window[r]},${shrink_window[r]},${copy[r]},${shrink_copy[r]}"
done
med() { printf '%s\n' "$@" | median; }
w=$(med "${window[@]}") sw=$(med "${shrink_window[@]}") c=$(med "${copy[@]}") sc=$(med "${shrink_copy[@]}")
awk -v w="$w" -v sw="$sw" -v c="$c" -v sc="$sc" -v p="$pes" 'BEGIN {
  printf "medians, %d PEs: window %.1f us, shrink %.1f us; copy-out %.1f us, shrink %.1f us\n", p, w, sw, c, sc
  printf "shrink/off: window %.3f, copy-out %.3f\n", sw / w, sc / c }'
