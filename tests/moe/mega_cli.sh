#!/usr/bin/env bash
# shmoe-moe mega's command line and environment: each refusal must name the value and the limit
# and exit non-zero (never by a signal) without starting a run that hangs; a shape larger than
# the machine's memory is refused at once with the largest --tokens that fits; an output file
# that cannot be written is refused naming the option; the environment names MoE benchmark
# scripts set (RANK_SIZE, TOKEN_COUNT...) must run a verified layer; --trace must write a Chrome trace with every stage of every PE, and
# --csv the perf line.
#   mega_cli.sh SHMOE_MOE
set -uo pipefail
moe=${1:?usage: mega_cli.sh SHMOE_MOE}
failures=0
small=(--tokens 4 --model-dim 32 --ffn-dim 64 --topk 2 --experts-per-pe 2 --timeout 60)

# expect_refusal "what" "expected message part" command...
expect_refusal() {
  local what=$1 expected=$2
  shift 2
  local out status
  local start=$SECONDS
  out=$("$@" 2>&1)
  status=$?
  if ((status == 0 || status >= 128)) || ! grep -qF -- "$expected" <<<"$out"; then
    echo "FAIL: $what: status $status, expected a refusal with '$expected', got:"
    echo "$out" | head -20
    failures=$((failures + 1))
  elif ((SECONDS - start > 20)); then
    echo "FAIL: $what: the refusal took $((SECONDS - start)) s"
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}

expect_refusal "odd FFN_DIM" "FFN_DIM (--ffn-dim)=63 must be even" \
  "$moe" mega --pes 2 "${small[@]}" --ffn-dim 63
expect_refusal "topk above the expert count" \
  "EXPERTS_PER_TOKEN (--topk)=5 is out of range (1..4, the expert count 2 PEs x 2 experts)" \
  "$moe" mega --pes 2 "${small[@]}" --topk 5
expect_refusal "AIC_NUM alone" "must be given together" \
  env AIC_NUM=2 "$moe" mega --pes 2 "${small[@]}"
expect_refusal "AIV not twice AIC" "AIC_NUM (--matrix-workers)=2 and AIV_NUM (--vector-workers)=3: give both or neither, with AIV_NUM (--vector-workers) = 2 x AIC_NUM (--matrix-workers)" \
  "$moe" mega --pes 2 "${small[@]}" --matrix-workers 2 --vector-workers 3
expect_refusal "symmetric heap too small" "raise SHMEM_SYMMETRIC_SIZE" \
  env SHMEM_SYMMETRIC_SIZE=64K "$moe" mega --pes 2 "${small[@]}" --tokens 64 --model-dim 256
expect_refusal "received tokens beyond MAX_RECEIVED_TOKENS" \
  "would receive" "$moe" mega --pes 2 "${small[@]}" --max-received-tokens 2
expect_refusal "unknown mode" "e5m3" "$moe" mega --pes 2 "${small[@]}" --mode e5m3
expect_refusal "a shape beyond the machine's memory" \
  "--pes 2 --tokens 1048576 --model-dim 4096 --ffn-dim 8192 --topk 8 --experts-per-pe 4 does not fit in this machine's memory: " \
  "$moe" mega --pes 2 --tokens 1048576 --model-dim 4096 --ffn-dim 8192 --topk 8 --experts-per-pe 4
expect_refusal "what fits is said" "the largest --tokens (TOKEN_COUNT) that fits is " \
  "$moe" mega --pes 2 --tokens 1048576 --model-dim 4096 --ffn-dim 8192 --topk 8 --experts-per-pe 4
# A PE's private need grows with the matrix workers by their GEMM tiles only (a per-thread BLAS
# buffer reserved once made runs that fit refused): at this shape, 15 more workers add well under
# 1 GiB to the "of buffers" figure (128 MiB each would add 1.9 GiB).
buffers_gib() {
  "$moe" mega --pes 2 --tokens 1048576 --model-dim 4096 --ffn-dim 128 --topk 2 --experts-per-pe 2 \
    --matrix-workers "$1" --vector-workers "$2" 2>&1 |
    sed -n 's/.* + \([0-9.]*\) GiB of buffers, inputs, golden data and weights.*/\1/p'
}
one=$(buffers_gib 1 2)
sixteen=$(buffers_gib 16 32)
if [[ -n $one && -n $sixteen ]] && python3 -c "import sys; sys.exit(not 0 <= $sixteen - $one < 0.5)"; then
  echo "ok: matrix workers add only their tiles ($one GiB at 1, $sixteen GiB at 16)"
else
  echo "FAIL: matrix workers: '$one' GiB of buffers at 1, '$sixteen' GiB at 16"
  failures=$((failures + 1))
fi
expect_refusal "weights beyond the machine's memory" \
  "no --tokens fits: the experts' weights alone are too large" \
  "$moe" mega --pes 8 --tokens 16 --model-dim 65536 --ffn-dim 131072 --topk 2 --experts-per-pe 64
expect_refusal "received rows beyond any call" "--max-received-tokens: Value 274877906945 not in range" \
  "$moe" mega --pes 2 "${small[@]}" --max-received-tokens 274877906945
expect_refusal "unwritable --trace" \
  "--trace=/proc/nonexistent/t.json: cannot write it: the directory /proc/nonexistent does not exist" \
  "$moe" mega --pes 2 "${small[@]}" --trace /proc/nonexistent/t.json
expect_refusal "unwritable --csv" \
  "--csv=/proc/nonexistent/x.csv: cannot write it: the directory /proc/nonexistent does not exist" \
  "$moe" mega --pes 2 "${small[@]}" --csv /proc/nonexistent/x.csv --perf
expect_refusal "--csv naming a directory" "--csv=/tmp: it is a directory, not a file" \
  "$moe" mega --pes 2 "${small[@]}" --csv /tmp --perf
expect_refusal "unknown schedule" "sideways" "$moe" mega --pes 2 "${small[@]}" --schedule sideways

# The environment names MoE benchmark scripts set (this small shape runs the solo schedule, where
# the calling thread does every part and no worker runs).
out=$(RANK_SIZE=2 TOKEN_COUNT=6 MODEL_DIM=64 FFN_DIM=128 EXPERTS_PER_TOKEN=2 LOCAL_EXPERT_COUNT=2 \
  MODE=e5m2 MAX_RECEIVED_TOKENS=0 WARMUP=1 LOOP=2 AIC_NUM=1 AIV_NUM=2 \
  "$moe" mega --perf --timeout 60 2>&1)
if grep -q "^mega: pes=2 tokens=6 model_dim=64 ffn_dim=128 topk=2 experts_per_pe=2 mode=e5m2 workers=solo verify=pass(expert_token,numeric_golden,fp8_replay) e2e_avg_ms=[0-9.]* .*kernel_max_ms=[0-9.]* loops=2" <<<"$out"; then
  echo "ok: environment names"
else
  echo "FAIL: environment names:"
  echo "$out"
  failures=$((failures + 1))
fi

# --trace: a Chrome trace with every worker's stages, on every PE; under the solo schedule, every
# stage on the one calling thread.
trace=$(mktemp --suffix=.json)
trap 'rm -f "$trace"' EXIT
for schedule in inline solo; do
  out=$("$moe" mega --pes 2 "${small[@]}" --tokens 40 --schedule $schedule --trace "$trace" 2>&1)
  # Under the solo schedule no worker runs, and the banner says so.
  if [[ $schedule == solo ]] && ! grep -q "^mega: pes=2 .* workers=solo verify=pass" <<<"$out"; then
    echo "FAIL: the solo schedule's line does not say workers=solo ($out)"
    failures=$((failures + 1))
  fi
  if python3 - "$trace" $schedule <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
spans = [e for e in events if e["ph"] == "X"]
for pe in (0, 1):
    stages = {e["cat"] for e in spans if e["pid"] == pe}
    need = {"header+plan", "quantize", "dispatch", "wait rows", "gemm1", "swiglu", "gemm2",
            "write-back", "combine wait", "reduce"}
    assert need <= stages, f"PE {pe} lacks {need - stages}"
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
if sys.argv[2] == "solo":
    assert names == {"calling thread (solo)"}, names
    assert {e["tid"] for e in spans} == {0}
else:
    assert {"matrix 0", "vector 0", "vector 1"} <= names, names
PY
  then
    echo "ok: trace ($schedule)"
  else
    echo "FAIL: trace, schedule $schedule ($out)"
    failures=$((failures + 1))
  fi
done
# Memory that cannot be had inside a PE (no admission there: a PE started as one, under a 3 GiB
# address-space limit, given weights of 1.1 GB and their packed copies; the symmetric window's
# aligned reservation alone needs more than 1 GiB of address space): a message and status 1, not an abort. The
# sanitizers need far more address space than the limit leaves, so their runs skip this.
if [[ -z ${ASAN_OPTIONS:-}${TSAN_OPTIONS:-} ]]; then
  expect_refusal "std::bad_alloc in a PE" "PE 0: out of memory: this shape needs more memory" \
    bash -c 'ulimit -v 3145728 && SHMOE_MOE_PE=1 SHMEM_SYMMETRIC_SIZE=64M exec "$0" mega --pes 1 --tokens 4 --model-dim 65536 --ffn-dim 16384 --topk 1 --experts-per-pe 1' "$moe"
fi

# A CSV that takes no data (a full disk): the run fails saying so, rather than ending with 0.
if [[ -w /dev/full ]]; then
  expect_refusal "--csv on a full device" "PE 0: error: cannot write --csv=/dev/full: No space left on device" \
    "$moe" mega --pes 2 "${small[@]}" --perf --warmup 0 --loops 1 --csv /dev/full
fi

# --csv: a header, then one line per timed run.
csv=$(mktemp -u --suffix=.csv)
trap 'rm -f "$trace" "$csv"' EXIT
out=$("$moe" mega --pes 2 "${small[@]}" --perf --warmup 0 --loops 1 --csv "$csv" 2>&1)
if [[ $(head -1 "$csv" 2>/dev/null) == run_id,time,variant,pes,tokens,* ]] &&
   [[ $(grep -cE "^[0-9]+-[0-9]+,[0-9T:-]+Z,fused,2,4,32,64,2,2,e4m3," "$csv") == 1 ]]; then
  echo "ok: csv"
else
  echo "FAIL: csv ($out):"
  cat "$csv"
  failures=$((failures + 1))
fi
# The same file gathers a second run; a file of other columns is refused.
"$moe" mega --pes 2 "${small[@]}" --perf --warmup 0 --loops 1 --csv "$csv" >/dev/null 2>&1
if [[ $(grep -c "^run_id," "$csv") == 1 ]] && [[ $(grep -c ",fused,2,4,32,64,2,2,e4m3," "$csv") == 2 ]]; then
  echo "ok: csv gathers runs"
else
  echo "FAIL: the second run was not appended:"
  cat "$csv"
  failures=$((failures + 1))
fi
echo "variant,pes,tokens" >"$csv"
out=$("$moe" mega --pes 2 "${small[@]}" --perf --warmup 0 --loops 1 --csv "$csv" 2>&1)
if (($? != 0)) && grep -q "holds rows of other columns" <<<"$out"; then
  echo "ok: csv of other columns refused"
else
  echo "FAIL: a CSV of other columns was not refused: $out" | head -5
  failures=$((failures + 1))
fi
((failures == 0))
