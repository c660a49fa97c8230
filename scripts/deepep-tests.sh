#!/bin/sh
# Runs DeepEP's own tests against deep_ep on torch 2.x, with only the mechanical edits a CPU needs
# (scripts/deepep-cpu-edits.sh lists them). DeepEP's files go to a temporary directory, never
# into this repo.
#
#   scripts/deepep-tests.sh DEEPEP_CHECKOUT [BUILD_DIR | --installed]
#
# DEEPEP_CHECKOUT: a checkout or a bare git directory of DeepEP. BUILD_DIR (default build): the
# build tree's package; --installed: the package installed in PYTHON's environment (pip).
# Suites (DEEPEP_SUITES: names, or the groups v1, legacy, elastic, all; default all):
#   v1 (DeepEP V1 at DEEPEP_COMMIT, 567632d: tests/test_*.py with tests/utils.py):
#     intranode low_latency low_latency_logfmt low_latency_shrink low_latency_shrink_hosts2
#   legacy (V1's tests as they are at DEEPEP_MAIN, HEAD: tests/legacy/):
#     legacy_intranode legacy_low_latency legacy_low_latency_logfmt legacy_low_latency_shrink
#     legacy_low_latency_shrink_hosts2 legacy_internode (2 simulated hosts x 1 and x 2)
#   elastic (ElasticBuffer, DEEPEP_MAIN's tests/elastic/):
#     elastic_ep (--skip-perf-test) elastic_ep_masked (--masked-ratio 0.3 --deterministic)
#     elastic_ep_single_reduction (--allow-multiple-reduction 0 --do-cpu-sync 0) elastic_ep_perf
#     elastic_ep_hosts2 elastic_barrier elastic_barrier_hosts2 elastic_pp elastic_agrs
#     elastic_engram elastic_engram_fp8 (--use-fp8)
# DEEPEP_MAIN's tests import DeepEP's helpers from deep_ep.utils (envs, math, refs, gate,
# testing): they are laid, edited, into a temporary copy of the package tested, first on
# PYTHONPATH. Each suite runs once per DEEPEP_PROCS ("2 3 4") count of processes, but for
# *_shrink (DeepEP's --shrink-test, which fails ranks 1, 3 and 5: once, at 8 processes), *_perf
# (once, 2 processes) and *_hosts2: once, as 2 simulated hosts of 2 ranks (legacy_internode:
# once with 1 rank a host, once with 2; *_shrink_hosts2: 4 a host, so ranks 1 and 3 of the
# first host and 5 of the second fail), started as DeepEP's init_dist expects (WORLD_SIZE=2 nodes, RANK=node, each spawning
# --num-processes ranks) with SHMOE_HOST_ID=deepep-host<node>: shared memory inside a host, UCX
# between. bench_kineto finds a kernel by a CPU profiler row whose name holds the kernel's name
# once (barrier, dispatch_impl, send_impl...), and gives 0 for a kernel with no row.
# Environment: PYTHON (the project's venv, scripts/venv.sh), SHMOE_SHRINK_TIMEOUT_MS (3000).
# Example: DEEPEP_SUITES="legacy elastic_ep" DEEPEP_PROCS=2 scripts/deepep-tests.sh ~/DeepEP
set -eu
here=$(cd "$(dirname "$0")" && pwd)
deepep=${1:?usage: $0 DEEPEP_CHECKOUT [BUILD_DIR | --installed]}
if [ "${2:-}" = --installed ]; then
  build=
else
  build=$(cd "${2:-$here/../build}" && pwd)
  export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
fi
commit=${DEEPEP_COMMIT:-567632d}
main=${DEEPEP_MAIN:-HEAD}
procs=${DEEPEP_PROCS:-2 3 4}
python=${PYTHON:-$("$here/venv.sh")}
v1_suites="intranode low_latency low_latency_logfmt low_latency_shrink low_latency_shrink_hosts2"
legacy_suites="legacy_intranode legacy_low_latency legacy_low_latency_logfmt
  legacy_low_latency_shrink legacy_low_latency_shrink_hosts2 legacy_internode"
elastic_suites="elastic_ep elastic_ep_masked elastic_ep_single_reduction elastic_ep_perf
  elastic_ep_hosts2 elastic_barrier elastic_barrier_hosts2 elastic_pp elastic_agrs elastic_engram
  elastic_engram_fp8"
suites=
for word in ${DEEPEP_SUITES:-all}; do
  case $word in
    v1) suites="$suites $v1_suites" ;;
    legacy) suites="$suites $legacy_suites" ;;
    elastic) suites="$suites $elastic_suites" ;;
    all) suites="$suites $v1_suites $legacy_suites $elastic_suites" ;;
    *) case " $(echo $v1_suites $legacy_suites $elastic_suites) " in
         *" $word "*) suites="$suites $word" ;;
         *) echo "DEEPEP_SUITES: unknown suite '$word' (groups: v1 legacy elastic all)" >&2
            exit 2 ;;
       esac ;;
  esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# take REV PATH...: DeepEP's PATHs at REV (a checkout that is no git repository: as they are).
take() {
  rev=$1
  shift
  if git -C "$deepep" rev-parse --verify -q "$rev^{commit}" >/dev/null 2>&1; then
    git -C "$deepep" archive "$rev" "$@" | tar -x -C "$work/$rev"
  else
    for path in "$@"; do mkdir -p "$work/$rev/$(dirname "$path")"; cp -r "$deepep/$path" \
      "$work/$rev/$path"; done
  fi
}
mkdir -p "$work/$commit" "$work/$main" "$work/pkg"
case "$suites" in *" intranode"* | *" low_latency"*)
  take "$commit" tests
  "$here/deepep-cpu-edits.sh" legacy "$work/$commit"/tests/*.py ;;
esac
helpers="envs math refs gate testing"
case "$suites" in *legacy_* | *elastic_*)
  take "$main" tests/legacy tests/elastic $(for h in $helpers; do echo "deep_ep/utils/$h.py"; done)
  # The package tested, copied, with DeepEP's helpers beside its own deep_ep.utils modules.
  package=$("$python" -c 'import importlib.util as u
print(u.find_spec("deep_ep").submodule_search_locations[0])' 2>/dev/null) || {
    echo "deepep-tests.sh: $python finds no package deep_ep (PYTHONPATH=${PYTHONPATH:-})" >&2
    exit 2
  }
  cp -r "$package" "$work/pkg/deep_ep"
  for h in $helpers; do
    if [ -e "$work/pkg/deep_ep/utils/$h.py" ]; then
      echo "deepep-tests.sh: deep_ep.utils.$h exists in $package: it must not (DeepEP's helper)" >&2
      exit 2
    fi
    cp "$work/$main/deep_ep/utils/$h.py" "$work/pkg/deep_ep/utils/"
  done
  "$here/deepep-cpu-edits.sh" legacy "$work/$main"/tests/legacy/*.py
  "$here/deepep-cpu-edits.sh" main $(for h in $helpers; do echo "$work/pkg/deep_ep/utils/$h.py"
    done) "$work/$main"/tests/legacy/*.py "$work/$main"/tests/elastic/*.py
  export PYTHONPATH="$work/pkg${PYTHONPATH:+:$PYTHONPATH}" ;;
esac

export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} SHMOE_HANG_TIMEOUT=${SHMOE_HANG_TIMEOUT:-120}
export SHMOE_SHRINK_TIMEOUT_MS=${SHMOE_SHRINK_TIMEOUT_MS:-3000}
status=0
port=$((20000 + $$ % 20000))

# hosts2 DIR ARGS...: DeepEP's init_dist on 2 simulated hosts (WORLD_SIZE nodes, RANK the node),
# each python spawning its --num-processes ranks; passes when both exit 0.
hosts2() {
  dir=$1
  shift
  for node in 0 1; do
    (cd "$dir" && WORLD_SIZE=2 RANK=$node SHMOE_HOST_ID=deepep-host$node MASTER_PORT=$port \
       timeout 900 "$python" "$@" >"$work/host$node.log" 2>&1; echo $? >"$work/host$node.rc") &
  done
  wait
  rc=0
  for node in 0 1; do
    sed "s/^/[host $node] /" "$work/host$node.log"
    [ "$(cat "$work/host$node.rc")" = 0 ] || rc=1
  done
  return $rc
}

done_once=" "
for n in $procs; do
  for suite in $suites; do
    dir=$work/$commit/tests k=$n how=local
    case $suite in
      *_shrink | *_perf | *_hosts2 | legacy_internode)
        case "$done_once" in *" $suite "*) continue ;; esac
        done_once="$done_once$suite " ;;
    esac
    locals=
    case $suite in
      legacy_internode) how=hosts2 locals="1 2" ;;
      *_shrink_hosts2) how=hosts2 locals=4 ;;
      *_hosts2) how=hosts2 locals=2 ;;
      *_shrink) k=8 ;;
      *_perf) k=2 ;;
    esac
    for k in ${locals:-$k}; do
      port=$((port + 1))
      np=$k e=$((8 * k))
      case $suite in
        *_hosts2 | legacy_internode) np=$((2 * k)) e=$((16 * k)) ;;
      esac
      case $suite in
        legacy_*) dir=$work/$main/tests/legacy ;;
        elastic_*) dir=$work/$main/tests/elastic ;;
      esac
      case $suite in
        intranode | legacy_intranode)
          set -- test_intranode.py --num-processes "$k" --num-tokens 128 --hidden 1024 \
                 --num-topk 4 --num-experts "$e" ;;
        low_latency | legacy_low_latency)
          set -- test_low_latency.py --num-processes "$k" --num-tokens 64 --hidden 2048 \
                 --num-topk 4 --num-experts "$e" ;;
        low_latency_logfmt | legacy_low_latency_logfmt)
          set -- test_low_latency.py --num-processes "$k" --num-tokens 32 --hidden 1024 \
                 --num-topk 8 --num-experts "$e" --use-logfmt ;;
        low_latency_shrink | legacy_low_latency_shrink | *low_latency_shrink_hosts2)
          set -- test_low_latency.py --shrink-test --num-processes "$k" --num-tokens 64 \
                 --hidden 2048 --num-topk 4 --num-experts 64 ;;
        legacy_internode)
          set -- test_internode.py --num-processes "$k" --num-tokens 128 --hidden 1024 \
                 --num-topk 4 --num-experts "$e" ;;
        elastic_ep | elastic_ep_hosts2)
          set -- test_ep.py --num-processes "$k" --num-tokens 64 --hidden 256 --num-topk 4 \
                 --num-experts "$e" --skip-perf-test ;;
        elastic_ep_masked)
          set -- test_ep.py --num-processes "$k" --num-tokens 64 --hidden 256 --num-topk 4 \
                 --num-experts "$e" --skip-perf-test --masked-ratio 0.3 --deterministic ;;
        elastic_ep_single_reduction)
          set -- test_ep.py --num-processes "$k" --num-tokens 64 --hidden 256 --num-topk 4 \
                 --num-experts "$e" --skip-perf-test --allow-multiple-reduction 0 --do-cpu-sync 0 ;;
        elastic_ep_perf)
          set -- test_ep.py --num-processes "$k" --num-tokens 64 --hidden 256 --num-topk 4 \
                 --num-experts "$e" --test-first-only ;;
        elastic_barrier | elastic_barrier_hosts2)
          set -- test_barrier.py --num-processes "$k" ;;
        elastic_pp)
          set -- test_pp.py --num-processes "$k" --num-tokens 64 --hidden 256 --num-sends 32 \
                 --num-stress-iterations 2 ;;
        elastic_agrs)
          set -- test_agrs.py --num-processes "$k" --num-stress-iterations 2 ;;
        elastic_engram | elastic_engram_fp8)
          set -- test_engram.py --num-processes "$k" --num-qps 1 --num-entries 4096 --hidden 128 \
                 --num-tokens 64 --num-entries-per-token 4
          [ $suite = elastic_engram ] || set -- "$@" --use-fp8 ;;
      esac
      echo "== DeepEP $suite, $np processes: $*"
      if [ $how = hosts2 ]; then
        if hosts2 "$dir" "$@"; then ok=1; else ok=; fi
      elif (cd "$dir" && MASTER_PORT=$port timeout 900 "$python" "$@"); then ok=1; else ok=; fi
      if [ -n "$ok" ]; then
        echo "== PASS $suite np$np"
      else
        echo "== FAIL $suite np$np"; status=1
      fi
    done
  done
done
exit $status
