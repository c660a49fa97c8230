#!/usr/bin/env bash
# MegaMoE: the fused operator against the unfused chain (same inputs, same run, calls
# alternating), for a decode shape (128 tokens per PE) and a prefill shape (2048),
# and the layer's GEMM work alone (bench/mega_gemm: the operator's tiles, one process per PE at
# once, and OpenBLAS's rate on the same shapes untiled) to say how close the layer comes to its
# GEMM time.
#   bench/mega_bench.sh [BUILD_DIR] [--quick]
# Shape: model_dim 512, ffn_dim 1024, top-4, 2 experts per PE, E4M3, 1 matrix + 2 vector workers.
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

printf '%-8s %4s %6s %10s %11s %8s %14s %11s %11s %9s %11s\n' shape pes tokens fused_ms \
  unfused_ms speedup gemm_alone_ms tile_gflops blas_gflops gemm_eff fused/gemm
for pes in 2 4; do
  for shape in decode prefill; do
    if [[ $shape == decode ]]; then T=128 loops=20; else T=2048 loops=3; fi
    [[ $quick == --quick ]] && loops=$((loops > 3 ? 5 : 1))
    # One run times both variants, call by call alternately (--compare --perf), after verifying.
    "$moe" mega --pes "$pes" --tokens "$T" --model-dim $D --ffn-dim $F --topk $K \
      --experts-per-pe $L --wave-rows $W --compare --perf --warmup 2 --loops "$loops" --seed 7 \
      --csv "$csv" >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
    grep -q "^mega: .*verify=pass" "$out/log" || { cat "$out/log"; exit 1; }
    fused=$(grep "^mega: pes" "$out/log" | grep -o "e2e_avg_ms=[0-9.]*" | cut -d= -f2)
    unfused=$(grep "^mega (unfused chain)" "$out/log" | grep -o "e2e_avg_ms=[0-9.]*" | cut -d= -f2)
    # GEMM time alone: every PE's GEMMs (T * K rows on average each), one process per PE, all at
    # once as in the layer, nothing else running: on this VM two concurrent sgemm threads each run
    # ~1.7x slower than one alone, so a single-thread figure would not be the layer's GEMM time.
    for ((p = 0; p < pes; ++p)); do "$gemm" $((T * K)) $D $F $L $W 3 >"$out/gemm$p" & done
    wait
    alone=$(cut -d, -f7 "$out"/gemm* | sort -g | tail -1)
    tile_gflops=$(cut -d, -f9 "$out/gemm0")
    blas_gflops=$(cut -d, -f10 "$out/gemm0")
    eff=$(cut -d, -f11 "$out/gemm0")
    printf '%-8s %4d %6d %10.3f %11.3f %8.2f %14.3f %11.2f %11.2f %9.3f %11.2f\n' "$shape" "$pes" \
      "$T" "$fused" "$unfused" "$(awk -v a="$unfused" -v b="$fused" 'BEGIN {print a / b}')" \
      "$alone" "$tile_gflops" "$blas_gflops" "$eff" "$(awk -v a="$fused" -v b="$alone" 'BEGIN {print a / b}')"
  done
done
echo "fused_ms/unfused_ms: e2e average of the slowest PE; speedup = unfused / fused"
echo "gemm_alone_ms: every PE's GEMM tiles run at once, one process per PE, nothing else (slowest)"
echo "tile_gflops/blas_gflops: PE 0's GEMM process, the operator's tiles / one untiled sgemm per"
echo "  expert and weight (OpenBLAS's own rate on the same shapes); gemm_eff = tile / blas rate"
echo "CSV: $csv"
