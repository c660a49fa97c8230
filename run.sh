#!/usr/bin/env bash
# The main job: installs what the build needs, builds, and runs a 4-PE job on this machine that
# verifies its data and prints perf lines (CSV) next to single-thread memcpy.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
scripts/build.sh
export SHMEM_SYMMETRIC_SIZE=${SHMEM_SYMMETRIC_SIZE:-512M}
build/tools/shmoerun/shmoerun -n 4 build/bench/shmem_bench "$@"
