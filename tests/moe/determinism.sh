#!/usr/bin/env bash
# Runs moe_determinism at 1, 2, 4 and 8 PEs, with 1 and 3 vector workers, classic and double
# plane and rows read in the receive window, on one fresh seed, and requires every output file to
# be byte-identical.
set -euo pipefail
shmoerun=$1 prog=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
seed=$(od -An -N6 -tu8 /dev/urandom | tr -d ' ')
echo "seed=$seed"
ref=""
for n in 1 2 4 8; do
  for workers in 1 3; do
    for plane in classic double window; do
      out="$dir/out_${n}_${workers}_${plane}.bin"
      SHMEM_SYMMETRIC_SIZE=64M "$shmoerun" -n "$n" --timeout 120 "$prog" "$out" "$seed" "$workers" "$plane"
      if [[ -z $ref ]]; then
        ref=$out
      elif ! cmp "$ref" "$out"; then
        echo "FAIL: $n PEs, $workers workers, $plane plane differs from $(basename "$ref")"
        exit 1
      fi
    done
  done
done
echo "PASS: 24 runs byte-identical ($(stat -c %s "$ref") bytes each)"
