#!/usr/bin/env bash
# What the Python binding adds to MoE dispatch + combine: the same calls, at the decode shape
# (128 tokens per PE, hidden 7168, top-8 of 8 experts per PE, bfloat16), from C++
# (python_moe_bench_cxx, the C++ API) and from Python (shmoe.moe.Buffer, numpy and torch), each
# timed around the calls on the host clock; the slowest PE's mean and median per pair of calls.
# The runs alternate C++ and Python ROUNDS times, so that both see the same machine; a last run
# alternates the Buffer and the bare C++ operators call by call inside one Python process and
# prints the median of the paired differences (the steadier figure on a loaded machine).
#   bench/python_moe_bench.sh [BUILD_DIR] [PES] [ROUNDS]
set -euo pipefail
build=${1:-build}
pes=${2:-4}
rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
python=$("$here/configured_python.sh" "$build")
run=("$build/tools/shmoerun/shmoerun" -n "$pes" --timeout 300)
shape=(128 7168 8 8)
export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH} OMP_NUM_THREADS=1
export SHMEM_SYMMETRIC_SIZE=${SHMEM_SYMMETRIC_SIZE:-1G}

medians_cxx=() medians_py=() medians_torch=()
for ((r = 0; r < rounds; r++)); do
  line=$("${run[@]}" "$build/python/python_moe_bench_cxx" "${shape[@]}" 5 50 | grep '^cxx:')
  echo "$line"
  medians_cxx+=("$(sed -E 's/.*median_us=([0-9.]+).*/\1/' <<<"$line")")
  line=$("${run[@]}" "$python" "$here/python_moe_bench.py" | grep '^python')
  echo "$line"
  medians_py+=("$(sed -E 's/.*median_us=([0-9.]+).*/\1/' <<<"$line")")
  if "$python" -c 'import torch' 2>/dev/null; then
    line=$("${run[@]}" "$python" "$here/python_moe_bench.py" --torch | grep '^python')
    echo "$line"
    medians_torch+=("$(sed -E 's/.*median_us=([0-9.]+).*/\1/' <<<"$line")")
  fi
done
"${run[@]}" "$python" "$here/python_moe_bench.py" --raw --loops 100 | grep -E '^(python|bare|the binding)'
"$python" - "${medians_cxx[*]}" "${medians_py[*]}" "${medians_torch[*]}" <<'PY'
import statistics, sys
cxx = [float(v) for v in sys.argv[1].split()]
for name, values in (("numpy", sys.argv[2]), ("torch", sys.argv[3])):
    if not values.strip():
        continue
    py = [float(v) for v in values.split()]
    c, p = statistics.median(cxx), statistics.median(py)
    print(f"dispatch+combine, decode shape: C++ {c:.1f} us, Python ({name}) {p:.1f} us: "
          f"the binding adds {100 * (p - c) / c:+.1f}% (median of {len(py)} runs' medians)")
PY
