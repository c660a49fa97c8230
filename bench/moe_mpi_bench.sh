#!/usr/bin/env bash
# shmoe's dispatch and combine against Open MPI's MPI_Alltoallv (bench/moe_mpi_bench.cpp) at a
# decode shape (128 tokens per PE) and a prefill shape (4096), hidden 7168, top-8, 8 experts per
# PE, bfloat16, on 2 and 4 PEs; mpirun starts both, Open MPI's shared-memory transport as Debian
# configures it.
#   bench/moe_mpi_bench.sh [BUILD_DIR] [--quick] [moe_mpi_bench options]
set -euo pipefail
build=${1:-build}
shift || true
quick=
extra=()
for a in "$@"; do
  if [[ $a == --quick ]]; then quick=$a; else extra+=("$a"); fi
done
bench="$build/bench/moe_mpi_bench"
[[ -x $bench ]] || { echo "moe_mpi_bench: $bench is not built (needs libopenmpi-dev)" >&2; exit 1; }
flags=(--oversubscribe)  # 4 PEs on 2 cores
[[ $(id -u) == 0 ]] && flags+=(--allow-run-as-root)
loops=10 prefill_loops=3 rounds=7
[[ $quick == --quick ]] && loops=3 prefill_loops=1 rounds=3
for pes in 2 4; do
  for tokens in 128 4096; do
    l=$loops
    ((tokens > 128)) && l=$prefill_loops
    echo "== $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
    mpirun "${flags[@]}" -np "$pes" "$bench" --tokens "$tokens" --loops "$l" --rounds "$rounds" \
      "${extra[@]}"
  done
done
