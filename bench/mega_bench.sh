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
# Other processes on the machine move every figure; run it when `uptime` shows it quiet.
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

# gemm_alone PES ROWS: mega_gemm in one process per PE at once, as the layer runs them (on 2
# cores, concurrent GEMM threads slow each other down; a lone one would flatter the limit).
# Sets tiles and limit (ms, the slowest process's), wbytes, wgbps and cgbps (weight and memcpy
# GB/s) and kernel (the '#' line).
gemm_alone() {
  local reps=7
  [[ $quick == --quick ]] && reps=3
  rm -f "$out"/pe*.gemm
  for ((p = 0; p < $1; ++p)); do "$gemm" "$2" $D $F $L $W $reps >"$out/pe$p.gemm" & done
  wait
  kernel=$(grep "^#" "$out/pe0.gemm" | cut -c3-)
  grep -hv "^#" "$out"/pe*.gemm >"$out/gemm.csv"
  tiles=$(cut -d, -f7 "$out/gemm.csv" | sort -g | tail -1)
  limit=$(cut -d, -f8 "$out/gemm.csv" | sort -g | tail -1)
  # Weight and memcpy rates from the same process, the one with the slowest tiles.
  local slowest
  slowest=$(sort -t, -k7 -g "$out/gemm.csv" | tail -1)
  wbytes=$(cut -d, -f12 <<<"$slowest")
  wgbps=$(cut -d, -f13 <<<"$slowest")
  cgbps=$(cut -d, -f14 <<<"$slowest")
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

printf '%-8s %4s %6s %9s %11s %13s %9s %12s %10s %11s\n' shape pes tokens fused_ms unfused_ms \
  unfused/fused limit_ms fused/limit tiles_ms tiles/limit
for pes in 2 4; do
  for shape in decode prefill; do
    if [[ $shape == decode ]]; then T=128 loops=20; else T=2048 loops=3; fi
    [[ $quick == --quick ]] && loops=$((loops > 3 ? 5 : 1))
    layer "$pes" "$T" "$loops"
    gemm_alone "$pes" $((T * K))
    printf '%-8s %4d %6d %9.3f %11.3f %13s %9.3f %12s %10.3f %11s\n' "$shape" "$pes" "$T" \
      "$fused" "$unfused" "$(ratio "$unfused" "$fused")" "$limit" "$(ratio "$fused" "$limit")" \
      "$tiles" "$(ratio "$tiles" "$limit")"
  done
done
echo "fused_ms/unfused_ms: e2e average of the slowest PE (calls alternating in one run)"
echo "limit_ms: oneDNN's matmul on the GEMMs a PE gets, one process per PE at once (slowest)"
echo "tiles_ms: the operator's GEMM tiles alone, FP8 expansion included, measured the same way"
echo "GEMMs: $kernel"
echo

printf '%-12s %6s %9s %11s %12s %11s %11s %12s %13s %13s\n' decode_small tokens fused_ms \
  unfused_ms weight_bytes tiles_GB/s layer_GB/s memcpy_GB/s tiles/memcpy layer/memcpy
for T in 1 4 16; do
  layer 2 "$T" $([[ $quick == --quick ]] && echo 20 || echo 200)
  gemm_alone 2 $((T * K))
  layer_gbps=$(awk -v b="$wbytes" -v ms="$fused" 'BEGIN {printf "%.2f", b / ms / 1e6}')
  printf '%-12s %6d %9.3f %11.3f %12d %11.2f %11.2f %12.2f %13s %13s\n' "2 PEs" "$T" "$fused" \
    "$unfused" "$wbytes" "$wgbps" "$layer_gbps" "$cgbps" "$(ratio "$wgbps" "$cgbps")" \
    "$(ratio "$layer_gbps" "$cgbps")"
done
echo "weight_bytes: packed weights one PE's GEMMs read per call (every local expert gets rows)"
echo "tiles_GB/s: weight_bytes / the GEMM tiles' time alone; layer_GB/s: / the fused layer's time"
echo "memcpy_GB/s: memcpy of weight_bytes in the same process (bytes copied per second)"
echo "CSV: $csv"
