#!/bin/sh
# Runs DeepEP's own tests (tests/test_intranode.py, tests/test_low_latency.py with tests/utils.py,
# commit 567632d) against deep_ep on torch 2.x, with only the mechanical edits a CPU needs:
# cuda -> cpu, 'nccl' -> 'gloo', the profiler's CUDA activity and sort key -> CPU, the 8192x8192
# dummy GEMMs -> 256x256, and all_gather_into_tensor into a stacked [ranks, ...] output ->
# all_gather into its slices (gloo takes only the concatenated form). DeepEP's files go to a
# temporary directory, never into this repo.
#
#   scripts/deepep-tests.sh DEEPEP_CHECKOUT [BUILD_DIR | --installed]
#
# DEEPEP_CHECKOUT: a checkout or a bare git directory of DeepEP. BUILD_DIR (default build): the
# build tree's package; --installed: the package installed in PYTHON's environment (pip).
# Environment: DEEPEP_COMMIT (567632d), DEEPEP_PROCS ("2 3 4"), DEEPEP_SUITES
# ("intranode low_latency low_latency_logfmt low_latency_shrink"), PYTHON (the project's venv,
# scripts/venv.sh), SHMOE_SHRINK_TIMEOUT_MS (3000, for low_latency_shrink).
# low_latency_shrink is DeepEP's --shrink-test, which fails ranks 1, 3 and 5: it runs once, at 8
# processes, whatever DEEPEP_PROCS says.
set -eu
deepep=${1:?usage: $0 DEEPEP_CHECKOUT [BUILD_DIR]}
if [ "${2:-}" = --installed ]; then
  build=
else
  build=$(cd "${2:-$(dirname "$0")/../build}" && pwd)
fi
commit=${DEEPEP_COMMIT:-567632d}
procs=${DEEPEP_PROCS:-2 3 4}
suites=${DEEPEP_SUITES:-intranode low_latency low_latency_logfmt low_latency_shrink}
python=${PYTHON:-$("$(dirname "$0")/venv.sh")}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if git -C "$deepep" rev-parse --verify -q "$commit^{commit}" >/dev/null 2>&1; then
  git -C "$deepep" archive "$commit" tests | tar -x -C "$work"
else
  cp -r "$deepep/tests" "$work/"
fi
tests=$work/tests
# The mechanical edits, nothing else.
sed -i -e "s/'cuda'/'cpu'/g; s/\"cuda\"/\"cpu\"/g; s/cuda:/cpu:/g; s/torch\.cuda\./torch.cpu./g" \
       -e "s/'nccl'/'gloo'/g" \
       -e "s/ProfilerActivity\.CUDA/ProfilerActivity.CPU/g; s/cuda_time_total/cpu_time_total/g" \
       -e "s/(8192, 8192)/(256, 256)/g" \
       -e "s/all_gather_into_tensor(\([a-z_]*\), \([a-z_]*\)/all_gather(list(\1.unbind(0)), \2/g" \
       "$tests"/*.py

[ -z "$build" ] || export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} SHMOE_HANG_TIMEOUT=${SHMOE_HANG_TIMEOUT:-120}
export SHMOE_SHRINK_TIMEOUT_MS=${SHMOE_SHRINK_TIMEOUT_MS:-3000}
status=0
port=$((20000 + $$ % 20000))
shrink_done=
for n in $procs; do
  for suite in $suites; do
    port=$((port + 1))
    case $suite in
      low_latency_shrink)
        [ -z "$shrink_done" ] || continue
        shrink_done=1
        set -- test_low_latency.py --shrink-test --num-processes 8 --num-tokens 64 \
               --hidden 2048 --num-topk 4 --num-experts 64 ;;
      intranode)
        set -- test_intranode.py --num-processes "$n" --num-tokens 128 --hidden 1024 \
               --num-topk 4 --num-experts $((8 * n)) ;;
      low_latency)
        set -- test_low_latency.py --num-processes "$n" --num-tokens 64 --hidden 2048 \
               --num-topk 4 --num-experts $((8 * n)) ;;
      low_latency_logfmt)
        set -- test_low_latency.py --num-processes "$n" --num-tokens 32 --hidden 1024 \
               --num-topk 8 --num-experts $((8 * n)) --use-logfmt ;;
      *) echo "unknown suite $suite" >&2; exit 2 ;;
    esac
    np=$n
    [ "$suite" != low_latency_shrink ] || np=8
    echo "== DeepEP $suite, $np processes: $*"
    if (cd "$tests" && MASTER_PORT=$port timeout 900 "$python" "$@"); then
      echo "== PASS $suite np$np"
    else
      echo "== FAIL $suite np$np"; status=1
    fi
  done
done
exit $status
