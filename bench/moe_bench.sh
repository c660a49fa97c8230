#!/usr/bin/env bash
# MoE dispatch and combine effective bandwidth against single-thread memcpy measured in the same
# run, for a decode shape (128 tokens per PE, hidden 7168, top-8, bf16) and a prefill shape (4096
# tokens per PE) at 2 and 4 PEs.
#   bench/moe_bench.sh [BUILD_DIR] [--quick] [shmoe-moe options, e.g. --copy-out]
# The bytes are those a perfect operator must move once: every routed (token, top-k slot) row,
# once (dispatch: to its expert's PE; combine: back to its token's PE), summed over the PEs; the
# time is that of the slowest worker of any PE for one call. The headline, per_pe/memcpy, divides
# one PE's rate (the aggregate over the PE count) by one thread's memcpy rate on a buffer of a
# matching size (16 MiB: one PE's decode payload; 64 MiB, beyond the caches: prefill): each PE
# runs on about one core, so this is the operator against a copy by that core. Where PEs outnumber
# the cores (4 PEs on 2), a PE has only part of a core: per_core/memcpy divides the aggregate by
# memcpy times the cores the PEs can use (min(cores, PEs)), the same as per_pe/memcpy otherwise.
# agg/memcpy, the sum over the PEs against one thread, flatters wherever PEs have cores of their
# own. Writes
# a CSV (MOE_BENCH_CSV, default output/perf/moe_bench.csv) and, with matplotlib in the build's
# interpreter, a PNG next to it. By default the tool leaves dispatch's rows in the
# receive window and combines from there (one copy per byte); --copy-out measures caller-owned
# buffers (a copy-out after dispatch, a send before combine's reduction).
set -euo pipefail
build=${1:-build}
shift || true
quick=
tool_options=()
for a in "$@"; do
  if [[ $a == --quick ]]; then quick=$a; else tool_options+=("$a"); fi
done
moe="$build/tools/moe/shmoe-moe"
bench="$build/bench/shmem_bench"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
loops=20 prefill_loops=3
[[ $quick == --quick ]] && loops=5 prefill_loops=1

# memcpy limit, measured now: 16 MiB (decode-sized) and 64 MiB (prefill-sized) copies.
memcpy_line() { "$build/tools/shmoerun/shmoerun" -n 1 "$bench" -H -m "$1" -M "$1" memcpy | tail -1; }
mc_small=$(memcpy_line 16M | cut -d, -f7)
mc_large=$(memcpy_line 64M | cut -d, -f7)
echo "memcpy (1 thread): 16 MiB ${mc_small} GB/s, 64 MiB ${mc_large} GB/s"
csv=${MOE_BENCH_CSV:-output/perf/moe_bench.csv}
mkdir -p "$(dirname "$csv")"
cores=$(nproc)
echo "shape,op,pes,time_us,per_pe_gbps,agg_gbps,memcpy_gbps,cores" >"$csv"
printf '%-8s %-22s %4s %11s %12s %14s %16s %10s %11s\n' shape op pes time_us per_pe_GB/s \
  per_pe/memcpy per_core/memcpy agg_GB/s agg/memcpy
for pes in 2 4; do
  for shape in decode prefill; do
    if [[ $shape == decode ]]; then bs=128 extra=() l=$loops mc=$mc_small
    else bs=4096 extra=(--max-recv-rows $((4096 * 8 * 5 / 4))) l=$prefill_loops mc=$mc_large; fi
    for op in dispatch combine dispatch-doubleplane combine-doubleplane; do
      "$moe" "$op" --pes "$pes" --bs "$bs" --hidden 7168 --topk 8 --experts-per-pe 8 --dtype bfloat16 \
        "${extra[@]}" "${tool_options[@]}" --perf --warmup 1 --loops "$l" --output-dir "$out" \
        >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
      grep -q "verify=pass" "$out/log" || { cat "$out/log"; exit 1; }
      line=$(grep "perf: .* full_op" "$out/log")
      t=$(sed -E 's/.*time_max=([0-9.]+).*/\1/' <<<"$line")
      bw=$(sed -E 's/.*bandwidth=([0-9.]+).*/\1/' <<<"$line")
      per=$(sed -E 's/.*per_pe=([0-9.]+).*/\1/' <<<"$line")
      printf '%-8s %-22s %4s %11.1f %12.2f %14.2f %16.2f %10.2f %11.2f\n' "$shape" "$op" "$pes" \
        "$t" "$per" "$(python3 -c "print($per / $mc)")" \
        "$(python3 -c "print($bw / ($mc * min($cores, $pes)))")" "$bw" \
        "$(python3 -c "print($bw / $mc)")"
      echo "$shape,$op,$pes,$t,$per,$bw,$mc,$cores" >>"$csv"
    done
  done
done
echo "CSV: $csv"
python=$("$(dirname "$0")/configured_python.sh" "$build")
if "$python" -c "import matplotlib" 2>/dev/null; then
  "$python" "$(dirname "$0")/plot_moe_bench.py" "$csv" "${csv%.csv}.png"
else
  echo "(no PNG: $python has no matplotlib)"
fi
