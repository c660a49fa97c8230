#!/usr/bin/env bash
# shmoe-moe mega's command line and environment: each refusal must name the value and the limit
# and exit non-zero without starting a run that hangs; the reference system's environment names
# must run a verified layer; --trace must write a Chrome trace with every stage of every PE.
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
  out=$("$@" 2>&1)
  status=$?
  if ((status == 0)) || ! grep -qF -- "$expected" <<<"$out"; then
    echo "FAIL: $what: status $status, expected a refusal with '$expected', got:"
    echo "$out" | head -20
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}

expect_refusal "odd FFN_DIM" "FFN_DIM (--ffn-dim) = 63 is odd" \
  "$moe" mega --pes 2 "${small[@]}" --ffn-dim 63
expect_refusal "topk above the expert count" \
  "EXPERTS_PER_TOKEN (--topk) = 5 is above the expert count 4 (RANK_SIZE 2 x LOCAL_EXPERT_COUNT 2)" \
  "$moe" mega --pes 2 "${small[@]}" --topk 5
expect_refusal "AIC_NUM alone" "must be given together" \
  env AIC_NUM=2 "$moe" mega --pes 2 "${small[@]}"
expect_refusal "AIV not twice AIC" "AIV_NUM (--vector-workers) = 3 must be twice AIC_NUM (--matrix-workers) = 2" \
  "$moe" mega --pes 2 "${small[@]}" --matrix-workers 2 --vector-workers 3
expect_refusal "symmetric heap too small" "raise SHMEM_SYMMETRIC_SIZE" \
  env SHMEM_SYMMETRIC_SIZE=64K "$moe" mega --pes 2 "${small[@]}" --tokens 64 --model-dim 256
expect_refusal "received tokens beyond MAX_RECEIVED_TOKENS" \
  "would receive" "$moe" mega --pes 2 "${small[@]}" --max-received-tokens 2
expect_refusal "unknown mode" "e5m3" "$moe" mega --pes 2 "${small[@]}" --mode e5m3
expect_refusal "unknown schedule" "sideways" "$moe" mega --pes 2 "${small[@]}" --schedule sideways

# The reference system's environment names.
out=$(RANK_SIZE=2 TOKEN_COUNT=6 MODEL_DIM=64 FFN_DIM=128 EXPERTS_PER_TOKEN=2 LOCAL_EXPERT_COUNT=2 \
  MODE=e5m2 MAX_RECEIVED_TOKENS=0 WARMUP=1 LOOP=2 AIC_NUM=1 AIV_NUM=2 \
  "$moe" mega --perf --timeout 60 2>&1)
if grep -q "^mega: pes=2 tokens=6 model_dim=64 ffn_dim=128 topk=2 experts_per_pe=2 mode=e5m2 workers=1+2 verify=pass(expert_token,numeric_golden,fp8_replay) e2e_avg_ms=[0-9.]* .*kernel_max_ms=[0-9.]* loops=2" <<<"$out"; then
  echo "ok: environment names"
else
  echo "FAIL: environment names:"
  echo "$out"
  failures=$((failures + 1))
fi

# --trace: a Chrome trace with every worker's stages, on every PE.
trace=$(mktemp --suffix=.json)
trap 'rm -f "$trace"' EXIT
out=$("$moe" mega --pes 2 "${small[@]}" --tokens 40 --trace "$trace" 2>&1)
if python3 - "$trace" <<'PY'
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
assert {"matrix 0", "vector 0", "vector 1"} <= names, names
PY
then
  echo "ok: trace"
else
  echo "FAIL: trace ($out)"
  failures=$((failures + 1))
fi
((failures == 0))
