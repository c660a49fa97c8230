#!/usr/bin/env bash
# MegaMoE, every ratio from one run:
#   1. the layer against its GEMM limit: fused and unfused (same inputs, calls alternating) at a
#      decode (128 tokens per PE) and a prefill (2048) shape at 2 and 4 PEs, against oneDNN's own
#      matmul on the same GEMMs (bench/mega_gemm: one process per PE at once, one thread each, the
#      GEMM shapes a PE gets, untiled, inputs already in the kernel's type), and the operator's
#      GEMM tiles alone (expansion of the FP8 rows included) against that limit;
#   2. small-batch decode (1, 4, 16 tokens per PE, 2 PEs), where the GEMMs are bound by reading
#      the weights: weight bytes per call over the time, against memcpy's bandwidth on as many
#      bytes measured in the same run, for the GEMM tiles alone and for the whole layer.
#   bench/mega_bench.sh [BUILD_DIR] [--quick]
# Shape: model_dim 512, ffn_dim 1024, top-4, 2 experts per PE, E4M3, 1 matrix + 2 vector workers.
# Other processes on the machine move every figure: each is a median of MEGA_BENCH_REPEATS runs
# (default 3; --quick: 1, and fewer calls), and the load is printed before and after.
set -euo pipefail
build=${1:-build}
quick=${2:-}
moe="$build/tools/moe/shmoe-moe"
gemm="$build/bench/mega_gemm"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
D=512 F=1024 K=4 L=2 W=128
csv=${MEGA_BENCH_CSV:-output/perf/mega_bench.csv}
mkdir -p "$(dirname "$csv")"
echo "# $(uptime)"

# layer PES TOKENS LOOPS: sets fused and unfused (ms, e2e average of the slowest PE).
layer() {
  "$moe" mega --pes "$1" --tokens "$2" --model-dim $D --ffn-dim $F --topk $K \
    --experts-per-pe $L --wave-rows $W --compare --perf --warmup 2 --loops "$3" --seed 7 \
    --csv "$csv" >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
  grep -q "^mega: .*verify=pass" "$out/log" || { cat "$out/log"; exit 1; }
  fused=$(grep "^mega: pes" "$out/log" | grep -o "e2e_avg_ms=[0-9.]*" | cut -d= -f2)
  unfused=$(grep "^mega (unfused chain)" "$out/log" | grep -o "e2e_avg_ms=[0-9.]*" | cut -d= -f2)
}

# gemm_group PES ROWS KIND REPS: mega_gemm's KIND (tiles or limit) in one process per PE at once,
# as the layer runs its GEMMs, REPS times back to back; prints the slowest process's mean (ms).
# On 2 cores concurrent GEMM threads slow each other down (a lone one would flatter the limit),
# and with more PEs than cores each run is cut by the others' time slices: a long loop's mean is
# the fair share.
gemm_group() {
  rm -f "$out"/pe*.gemm
  for ((p = 0; p < $1; ++p)); do "$gemm" "$2" $D $F $L $W "$4" "$3" >"$out/pe$p.gemm" & done
  wait
  cut -d, -f2 "$out"/pe*.gemm | sort -g | tail -1
}

# gemm_alone PES ROWS: both kinds, alternating groups; sets tiles and limit (ms).
gemm_alone() {
  local reps=$(($2 >= 4096 ? 8 : 100))
  [[ $quick == --quick ]] && reps=$((reps / 4))
  tiles=$(gemm_group "$1" "$2" tiles $reps)
  limit=$(gemm_group "$1" "$2" limit $reps)
}

# gemm_rates PES ROWS: mega_gemm in one process per PE at once, each alternating tiles, limit and
# memcpy; sets wbytes, wgbps and cgbps (weight and memcpy GB/s, from the process with the slowest
# tiles) and kernel (the '#' line).
gemm_rates() {
  local reps=7
  [[ $quick == --quick ]] && reps=3
  rm -f "$out"/pe*.gemm
  for ((p = 0; p < $1; ++p)); do "$gemm" "$2" $D $F $L $W $reps >"$out/pe$p.gemm" & done
  wait
  kernel=$(grep "^#" "$out/pe0.gemm" | cut -c3-)
  local slowest
  slowest=$(grep -hv "^#" "$out"/pe*.gemm | sort -t, -k7 -g | tail -1)
  wbytes=$(cut -d, -f12 <<<"$slowest")
  wgbps=$(cut -d, -f13 <<<"$slowest")
  cgbps=$(cut -d, -f14 <<<"$slowest")
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
# median V...: the middle value (the lower middle of an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
# Every figure is the median of $repeats runs, each ratio the median of the runs' own ratios
# (a layer run and its GEMM run are next to each other in time, so they see the same machine).
repeats=${MEGA_BENCH_REPEATS:-3}
[[ $quick == --quick ]] && repeats=1

printf '%-8s %4s %6s %9s %11s %13s %9s %12s %10s %11s\n' shape pes tokens fused_ms unfused_ms \
  unfused/fused limit_ms fused/limit tiles_ms tiles/limit
for pes in 2 4; do
  for shape in decode prefill; do
    if [[ $shape == decode ]]; then T=128 loops=20; else T=2048 loops=3; fi
    [[ $quick == --quick ]] && loops=$((loops > 3 ? 5 : 1))
    fs=() us=() ls=() ts=() uf=() fl=() tl=()
    for ((r = 0; r < repeats; ++r)); do
      layer "$pes" "$T" "$loops"
      gemm_alone "$pes" $((T * K))
      fs+=("$fused") us+=("$unfused") ls+=("$limit") ts+=("$tiles")
      uf+=("$(ratio "$unfused" "$fused")") fl+=("$(ratio "$fused" "$limit")")
      tl+=("$(ratio "$tiles" "$limit")")
    done
    printf '%-8s %4d %6d %9.3f %11.3f %13.2f %9.3f %12.2f %10.3f %11.2f\n' "$shape" "$pes" "$T" \
      "$(median "${fs[@]}")" "$(median "${us[@]}")" "$(median "${uf[@]}")" \
      "$(median "${ls[@]}")" "$(median "${fl[@]}")" "$(median "${ts[@]}")" "$(median "${tl[@]}")"
  done
done
echo "medians of $repeats runs; fused_ms/unfused_ms: e2e average of the slowest PE, calls"
echo "  alternating in one run; ratios: medians of each run's own ratio"
echo "limit_ms: oneDNN's matmul on the GEMMs a PE gets, one process per PE at once, the slowest"
echo "  one's mean over a loop; tiles_ms: the operator's GEMM tiles (FP8 expansion included) alike"
echo

printf '%-12s %6s %9s %11s %12s %11s %11s %12s %13s %13s\n' decode_small tokens fused_ms \
  unfused_ms weight_bytes tiles_GB/s layer_GB/s memcpy_GB/s tiles/memcpy layer/memcpy
for T in 1 4 16; do
  fs=() us=() ws=() lg=() cs=() tm=() lm=()
  for ((r = 0; r < repeats; ++r)); do
    layer 2 "$T" $([[ $quick == --quick ]] && echo 20 || echo 200)
    gemm_rates 2 $((T * K))
    layer_gbps=$(awk -v b="$wbytes" -v ms="$fused" 'BEGIN {printf "%.2f", b / ms / 1e6}')
    fs+=("$fused") us+=("$unfused") ws+=("$wgbps") lg+=("$layer_gbps") cs+=("$cgbps")
    tm+=("$(ratio "$wgbps" "$cgbps")") lm+=("$(ratio "$layer_gbps" "$cgbps")")
  done
  printf '%-12s %6d %9.3f %11.3f %12d %11.2f %11.2f %12.2f %13.2f %13.2f\n' "2 PEs" "$T" \
    "$(median "${fs[@]}")" "$(median "${us[@]}")" "$wbytes" "$(median "${ws[@]}")" \
    "$(median "${lg[@]}")" "$(median "${cs[@]}")" "$(median "${tm[@]}")" "$(median "${lm[@]}")"
done
echo "weight_bytes: packed weights one PE's GEMMs read per call (every local expert gets rows)"
echo "tiles_GB/s: weight_bytes / the GEMM tiles' time alone; layer_GB/s: / the fused layer's time"
echo "memcpy_GB/s: memcpy of weight_bytes in the same process (bytes copied per second)"
echo "GEMMs: $kernel"
echo "CSV: $csv"
echo "# $(uptime)"
