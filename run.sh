#!/usr/bin/env bash
# The main job: installs what the build needs, builds, and runs the fused MegaMoE layer on 4 PEs
# of this machine (decode shape: 128 tokens per PE, model_dim 512, ffn_dim 1024, top-4 of 8
# experts, E4M3): route, dispatch, MX FP8 quantization, GEMM1, SwiGLU, GEMM2 and combine in one
# operator launch per PE. Every output is verified (expert counts against a replay of the
# routing, every element against two fp64 references, bitwise against the unfused chain), then
# it prints the perf line. Extra arguments go to `shmoe-moe mega` (e.g. --pes 2, --mode e5m2).
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
scripts/build.sh
build/tools/moe/shmoe-moe mega --pes 4 --tokens 128 --model-dim 512 --ffn-dim 1024 --topk 4 \
  --experts-per-pe 2 --mode e4m3 --compare --perf --warmup 3 --loops 20 "$@"
