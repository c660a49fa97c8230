#!/usr/bin/env bash
# MegaMoE, every ratio from one run:
#   1. the layer against its GEMM limit: fused and unfused (same inputs, calls alternating), and
#      the fused layer alone (in a loop of its own, as the limit's GEMMs run: each call after a
#      streaming read of the weights' bytes, as a model's other layers leave the caches), at a
#      decode (128 tokens per PE) and a prefill (2048) shape at 2 and 4 PEs, against oneDNN's own
#      matmul on the same GEMMs (bench/mega_gemm: one process per PE at once, one thread each, the
#      GEMM shapes a PE gets, untiled, inputs already in the kernel's type), and the operator's
#      GEMM tiles alone (expansion of the FP8 rows included) against that limit;
#   2. small-batch decode (1, 4, 16, 64 tokens per PE, 2 and 4 PEs) at two real layer shapes and
#      the small one, where the GEMMs are bound by reading the weights: the weight bytes a call
#      reads (on the PE that reads the most) over its median time, against a streaming read of as
#      many bytes on every PE at once after each call, and the layer with FP8 weights against
#      the same layer with bf16 weights; then the fixed cost of a call. Draws the PNG next to the
#      CSV (matplotlib in the build's interpreter, bench/configured_python.sh).
#   bench/mega_bench.sh [BUILD_DIR] [--quick] [--baseline OLD_BUILD_DIR] [--layer-only]
#                       [--layer-shape MODEL_DIM:FFN_DIM] [--pes "2 4"] [--wave-rows N]
# --baseline: every run of part 1 and every FP8 run of part 2 also runs on OLD_BUILD_DIR (another
# commit's build), old and new alternating, so that both see the same machine; --layer-only: part 1
# alone. Part 1 also gives the epilogue's share of each PE's busy time from one traced call per run
# (bench/trace_share.py: SwiGLU with re-quantization, and the write-back of GEMM2's rows).
# Shape of part 1: model_dim 512, ffn_dim 1024 (--layer-shape: others, e.g. 2048:2816 for
# DeepSeek-V2-Lite's experts), top-4, 2 experts per PE, E4M3, 1 matrix + 2 vector workers, FP8
# weights (the default); --pes: the PE counts of part 1 (default "2 4"; a real shape's prefill
# takes about a second per call, so "2" alone keeps a run short); --wave-rows: the layer's GEMM
# tile rows (default: the operator's choice, which the layer prints; the tiles' mega_gemm runs
# take the rows the layer ran with, 128 for a build that does not print them).
# Other processes on the machine move every figure: each is a median of MEGA_BENCH_REPEATS runs
# (default 3; --quick: 1, and fewer calls), and the load is printed before and after.
set -euo pipefail
build=build quick='' baseline='' layer_only='' shape_arg=512:1024 pes_list='2 4' W=''
while (($#)); do
  case $1 in
    --quick) quick=--quick ;;
    --baseline) baseline=${2:?--baseline needs a build directory}; shift ;;
    --layer-only) layer_only=1 ;;
    --layer-shape) shape_arg=${2:?--layer-shape needs MODEL_DIM:FFN_DIM}; shift ;;
    --pes) pes_list=${2:?--pes needs PE counts, e.g. "2 4"}; shift ;;
    --wave-rows) W=${2:?--wave-rows needs a row count}; shift ;;
    -*) echo "mega_bench.sh: unknown option $1" >&2; exit 2 ;;
    *) build=$1 ;;
  esac
  shift
done
builds=("$build") labels=(new)
[[ -n $baseline ]] && builds=("$baseline" "$build") labels=(old new)
python=$("$(dirname "$0")/configured_python.sh" "$build")
share_py="$(dirname "$0")/trace_share.py"
gemm="$build/bench/mega_gemm"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[[ $shape_arg =~ ^([0-9]+):([0-9]+)$ ]] ||
  { echo "mega_bench.sh: --layer-shape $shape_arg: want MODEL_DIM:FFN_DIM, e.g. 2048:2816" >&2; exit 2; }
D=${BASH_REMATCH[1]} F=${BASH_REMATCH[2]} K=4 L=2
[[ $pes_list =~ ^[0-9]+( [0-9]+)*$ ]] ||
  { echo "mega_bench.sh: --pes '$pes_list': want PE counts (2 or more) separated by spaces" >&2; exit 2; }
[[ -z $W || $W =~ ^[1-9][0-9]*$ ]] || { echo "mega_bench.sh: --wave-rows '$W': want a row count" >&2; exit 2; }
waves=${W:-128}  # the limit's runs take no wave rows; layer() sets them for the tiles' runs
csv=${MEGA_BENCH_CSV:-output/perf/mega_bench.csv}
mkdir -p "$(dirname "$csv")"
echo "# $(uptime)"
echo "# part 1 shape: model_dim $D, ffn_dim $F, wave rows ${W:-automatic}"

# layer BUILD PES TOKENS LOOPS: sets fused and unfused (ms, e2e average of the slowest PE, calls
# alternating), alone (the fused layer in a loop of its own, as the limit's GEMMs run) and share
# (the epilogue's share of one traced fused call), and waves (the wave rows it ran with). The fp64 references check each PE's first 128
# tokens (a real shape's whole prefill takes minutes of them); the tests check every token.
layer() {
  local args=(mega --pes "$2" --tokens "$3" --model-dim $D --ffn-dim $F --topk $K --experts-per-pe $L
    ${W:+--wave-rows $W} --perf --warmup 2 --loops "$4" --seed 7 --csv "$csv" --verify-tokens 128)
  "$1/tools/moe/shmoe-moe" "${args[@]}" --compare --trace "$out/trace.json" >"$out/log" 2>&1 ||
    { cat "$out/log"; exit 1; }
  grep -q "^mega: .*verify=pass" "$out/log" || { cat "$out/log"; exit 1; }
  waves=$(sed -n 's/^mega: .* in waves of \([0-9]*\) rows.*/\1/p' "$out/log")
  waves=${waves:-${W:-128}}
  fused=$(grep "^mega: pes" "$out/log" | grep -o "e2e_avg_ms=[0-9.]*" | cut -d= -f2)
  unfused=$(grep "^mega (unfused chain)" "$out/log" | grep -o "e2e_avg_ms=[0-9.]*" | cut -d= -f2)
  share=$("$python" "$share_py" "$out/trace.json" | cut -d' ' -f1)
  "$1/tools/moe/shmoe-moe" "${args[@]}" >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
  grep -q "^mega: .*verify=pass" "$out/log" || { cat "$out/log"; exit 1; }
  alone=$(grep "^mega: pes" "$out/log" | grep -o "e2e_avg_ms=[0-9.]*" | cut -d= -f2)
}

# gemm_group PES ROWS KIND REPS: mega_gemm's KIND (tiles or limit) in one process per PE at once,
# as the layer runs its GEMMs, REPS times back to back; prints the slowest process's mean (ms).
# On 2 cores concurrent GEMM threads slow each other down (a lone one would flatter the limit),
# and with more PEs than cores each run is cut by the others' time slices: a long loop's mean is
# the fair share.
gemm_group() {
  rm -f "$out"/pe*.gemm
  for ((p = 0; p < $1; ++p)); do "${gemm:?}" "$2" $D $F $L "$waves" "$4" "$3" >"$out/pe$p.gemm" & done
  wait
  cut -d, -f2 "$out"/pe*.gemm | sort -g | tail -1
}

# gemm_reps ROWS: how many times gemm_group runs a kind.
gemm_reps() {
  local reps=$(($1 >= 4096 ? 8 : 100))
  [[ $quick == --quick ]] && reps=$((reps / 4))
  echo $reps
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
# median V...: the middle value (the lower middle of an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
# Every figure is the median of $repeats runs, each ratio the median of the runs' own ratios
# (a layer run and its GEMM run are next to each other in time, so they see the same machine).
repeats=${MEGA_BENCH_REPEATS:-3}
[[ $quick == --quick ]] && repeats=1

printf '%-8s %4s %6s %5s %9s %11s %13s %9s %12s %12s %11s %10s\n' shape pes tokens build fused_ms \
  unfused_ms unfused/fused limit_ms fused/limit alone/limit tiles/limit epi_share
for pes in $pes_list; do
  for shape in decode prefill; do
    if [[ $shape == decode ]]; then T=128 loops=20; else T=2048 loops=3; fi
    [[ $quick == --quick ]] && loops=$((loops > 3 ? 5 : 1))
    # Per build b, the runs' figures as words: fs[b]="1.2 1.3 ...".
    lims="" fs=() us=() uf=() fl=() al=() tl=() sh=()
    for ((r = 0; r < repeats; ++r)); do
      gemm="$build/bench/mega_gemm"
      limit=$(gemm_group "$pes" $((T * K)) limit "$(gemm_reps $((T * K)))")
      lims+=" $limit"
      for b in "${!builds[@]}"; do
        layer "${builds[b]}" "$pes" "$T" "$loops"
        gemm="${builds[b]}/bench/mega_gemm"
        tiles=$(gemm_group "$pes" $((T * K)) tiles "$(gemm_reps $((T * K)))")
        fs[b]+=" $fused" us[b]+=" $unfused" sh[b]+=" $share"
        uf[b]+=" $(ratio "$unfused" "$fused")" fl[b]+=" $(ratio "$fused" "$limit")"
        al[b]+=" $(ratio "$alone" "$limit")"
        tl[b]+=" $(ratio "$tiles" "$limit")"
      done
    done
    for b in "${!builds[@]}"; do
      # shellcheck disable=SC2086  # the words are the runs
      printf '%-8s %4d %6d %5s %9.3f %11.3f %13.2f %9.3f %12.3f %12.3f %11.2f %10.3f\n' "$shape" \
        "$pes" "$T" "${labels[b]}" "$(median ${fs[b]})" "$(median ${us[b]})" "$(median ${uf[b]})" \
        "$(median $lims)" "$(median ${fl[b]})" "$(median ${al[b]})" "$(median ${tl[b]})" \
        "$(median ${sh[b]})"
    done
  done
done
echo "medians of $repeats runs; fused_ms/unfused_ms: e2e average of the slowest PE, calls"
echo "  alternating in one run; alone: the fused layer's calls in a loop of their own, as the"
echo "  limit's are; ratios: medians of each run's own ratio"
echo "limit_ms: oneDNN's matmul on the GEMMs a PE gets, one process per PE at once, the slowest"
echo "  one's mean over a loop; tiles: the operator's GEMM tiles (FP8 expansion included) alike"
echo "epi_share: SwiGLU + re-quantization + write-back over the busy time of one traced fused call"
echo "  (bench/trace_share.py); builds: ${builds[*]} (${labels[*]}), alternating in each run"
echo
[[ -n $layer_only ]] && { echo "# $(uptime)"; exit 0; }

# weight_reads NAME D F EXPERTS K PES TOKENS WEIGHTS: one layer run; sets ms (e2e average of the
# slowest PE), wmb (weight MB the PE reading the most reads per call), wgbps (over the median
# call), rgbps (the streaming read of as many bytes, every PE at once, after each call: the
# median) and wr (wgbps / rgbps). Runs $moe; rows go to $wcsv for the plot unless it is the
# baseline's.
moe="$build/tools/moe/shmoe-moe"
weight_reads() {
  local loops=$(($7 >= 64 ? 20 : 100))
  [[ $quick == --quick ]] && loops=$((loops / 5))
  "$moe" mega --pes "$6" --tokens "$7" --model-dim "$2" --ffn-dim "$3" --topk "$5" \
    --experts-per-pe $(($4 / $6)) --weights "$8" --perf --warmup 3 --loops "$loops" --seed 7 \
    >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
  local line
  line=$(grep "^mega: pes" "$out/log")
  grep -q "verify=pass" <<<"$line" || { cat "$out/log"; exit 1; }
  ms=$(grep -o "e2e_avg_ms=[0-9.]*" <<<"$line" | cut -d= -f2)
  wmb=$(grep -o "weight_read_mb=[0-9.]*" <<<"$line" | cut -d= -f2)
  wgbps=$(grep -o "weight_gbps=[0-9.]*" <<<"$line" | cut -d= -f2)
  rgbps=$(grep -o "read_gbps=[0-9.]*" <<<"$line" | cut -d= -f2)
  wr=$(grep -o "weight/read=[0-9.]*" <<<"$line" | cut -d= -f2)
  [[ $moe == "$build/tools/moe/shmoe-moe" ]] && echo "$1,$6,$7,$8,$ms,$wmb,$wgbps,$rgbps" >>"$wcsv"
  return 0
}

# Small-batch decode at real layer shapes, whose weights do not fit in cache, and today's small
# one: the weights a call reads against the machine's read bandwidth, FP8 weights against bf16.
wcsv=${MEGA_BENCH_WEIGHTS_CSV:-output/perf/mega_weights.csv}
echo "shape,pes,tokens,weights,e2e_ms,weight_read_mb,weight_gbps,read_gbps" >"$wcsv"
printf '%-9s %4s %6s %8s %8s %9s %12s %12s %10s %13s %14s %8s\n' shape pes tokens fp8_ms bf16_ms \
  fp8/bf16 fp8_read_MB fp8_GB/s read_GB/s fp8_wt/read bf16_wt/read fp8/old
shapes=("small 512 1024 4 4" "dsv2lite 2048 2816 64 6" "qwen3 2048 1536 128 8")
token_counts=(1 4 16 64)
pe_counts=(2 4)
[[ $quick == --quick ]] && token_counts=(1 16) pe_counts=(2)
for spec in "${shapes[@]}"; do
  read -r name D_ F_ E_ K_ <<<"$spec"
  for pes in "${pe_counts[@]}"; do
    E=$E_
    [[ $name == small ]] && E=$((2 * pes))  # 2 experts per PE, as above
    for T in "${token_counts[@]}"; do
      f8=() b16=() ratios=() wrs=() gb=() rb=() bwrs=() olds=(-)
      for ((r = 0; r < repeats; ++r)); do
        if [[ -n $baseline ]]; then
          moe="$baseline/tools/moe/shmoe-moe"
          weight_reads "$name" "$D_" "$F_" "$E" "$K_" "$pes" "$T" fp8
          [[ $r == 0 ]] && olds=()
          olds+=("$ms")
          moe="$build/tools/moe/shmoe-moe"
        fi
        weight_reads "$name" "$D_" "$F_" "$E" "$K_" "$pes" "$T" bf16
        b16+=("$ms") bwrs+=("$wr")
        weight_reads "$name" "$D_" "$F_" "$E" "$K_" "$pes" "$T" fp8
        f8+=("$ms") wrs+=("$wr") gb+=("$wgbps") rb+=("$rgbps")
        ratios+=("$(ratio "$ms" "${b16[-1]}")")
        [[ -n $baseline ]] && olds[-1]=$(ratio "$ms" "${olds[-1]}")
      done
      printf '%-9s %4d %6d %8.3f %8.3f %9.2f %12.1f %12.2f %10.2f %13.2f %14.2f %8s\n' "$name" \
        "$pes" "$T" "$(median "${f8[@]}")" "$(median "${b16[@]}")" "$(median "${ratios[@]}")" "$wmb" \
        "$(median "${gb[@]}")" "$(median "${rb[@]}")" "$(median "${wrs[@]}")" \
        "$(median "${bwrs[@]}")" "$(median "${olds[@]}")"
    done
  done
done
echo "shapes: small D=512 F=1024 4 top of 2 experts per PE; dsv2lite: DeepSeek-V2-Lite's MoE layer"
echo "  (hidden 2048, expert FFN 1408, 64 experts, top-6); qwen3: Qwen3-30B-A3B's (2048, 768, 128,"
echo "  top-8); synthetic weights. fp8_read_MB: FP8 weight bytes the PE reading the most reads per"
echo "  call (only experts that got rows); fp8_GB/s: those bytes over the layer's median time;"
echo "  read_GB/s: a streaming read of as many bytes by one thread on every PE at once after each"
echo "  call (one stream, prefetching ahead: common/read_ahead.hpp; the median);"
echo "  bf16_wt/read: the same for the bf16 layer's own (twice as many) bytes, the form the default"
echo "  (auto) keeps where tokens x top-k > 4 x experts per PE; fp8/old: the FP8 layer's time over"
echo "  the baseline build's (--baseline, run just before it; the median of the runs' ratios)"
# A layer whose weights cost nothing: what is left is the call's fixed cost (start, routing,
# flags, combine).
fixed=()
for ((r = 0; r < repeats; ++r)); do
  "$moe" mega --pes 2 --tokens 1 --model-dim 64 --ffn-dim 64 --topk 1 --experts-per-pe 1 --perf \
    --warmup 20 --loops 500 --seed 7 >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
  fixed+=("$(grep "^mega: pes" "$out/log" | grep -o "e2e_avg_ms=[0-9.]*" | cut -d= -f2)")
done
echo "fixed cost per call (2 PEs, 1 token each, model_dim 64): $(median "${fixed[@]}") ms"
if "$python" -c "import matplotlib" 2>/dev/null; then
  "$python" "$(dirname "$0")/plot_weight_reads.py" "$wcsv" "${wcsv%.csv}.png"
else
  echo "(no PNG: $python has no matplotlib)"
fi
echo "CSV: $csv, $wcsv"
echo "# $(uptime)"
