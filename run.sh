#!/usr/bin/env bash
# The main job: installs what the build needs, builds, and runs MoE dispatch -> expert step ->
# combine on 4 PEs of this machine (decode shape: 128 tokens per PE, hidden 7168, top-8, bf16),
# verifying every output against independently computed golden data, then prints perf lines
# and writes CSVs to output/perf. Extra arguments go to shmoe-moe (e.g. --pes 8, --doubleplane).
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
scripts/build.sh
build/tools/moe/shmoe-moe pipeline --pes 4 --bs 128 --hidden 7168 --topk 8 --experts-per-pe 8 \
  --dtype bfloat16 --perf --warmup 3 --loops 20 "$@"
