#!/bin/bash
# Runs every shmoe fuzzer for SECONDS each, starting from its seed corpus, and fails if any of
# them finds a crash, a sanitizer report, an escaping exception, a leak, a timeout or an OOM.
#   tests/fuzz/run_fuzzers.sh BUILD_DIR SECONDS [FUZZER...]
# BUILD_DIR is a clang build tree (see CMakeLists.txt). New inputs go to a scratch corpus, so
# the seed corpus in the source tree stays small; reproducers are copied to
# BUILD_DIR/fuzz-findings/ and named in the output (replay one with: FUZZER FILE).
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS [FUZZER...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd) || exit 2
seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
fuzzers=("$@")
[ ${#fuzzers[@]} -gt 0 ] || fuzzers=(fuzz_wire fuzz_store_hello fuzz_parse fuzz_moe_options fuzz_shmoerun_options fuzz_config_options)

findings=$build/fuzz-findings
mkdir -p "$findings"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# shmoe-moe's parser prints help and errors for most inputs, and the store logs what it
# refuses; -close_fd_mask=3 silences the target's stdout/stderr while libFuzzer and the
# sanitizers keep reporting on a saved stderr.
extra_flags() {
  case $1 in
    fuzz_moe_options | fuzz_shmoerun_options | fuzz_config_options | fuzz_store_hello)
      echo "-close_fd_mask=3"
      ;;
  esac
}

# One fuzzer per core at a time (SHMOE_FUZZ_JOBS overrides): each still gets its SECONDS.
jobs_at_once=${SHMOE_FUZZ_JOBS:-$(nproc)}
run_one() {
  local f=$1 exe=$2
  # -timeout: one input taking over 10 s is a hang; -rss_limit_mb: libFuzzer's default 2 GiB.
  "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/$f-" $(extra_flags "$f") "$scratch/$f" \
    "$here/corpus/$f" >"$scratch/$f.log" 2>&1
  echo $? >"$scratch/$f.status"
}

failed=()
started=()
for f in "${fuzzers[@]}"; do
  exe=$build/tests/fuzz/$f
  if [ ! -x "$exe" ]; then
    echo "run_fuzzers: $exe is missing (build it: ninja -C $build shmoe_fuzzers)" >&2
    failed+=("$f (not built)")
    continue
  fi
  mkdir -p "$scratch/$f"
  while (($(jobs -rp | wc -l) >= jobs_at_once)); do wait -n; done
  run_one "$f" "$exe" &
  started+=("$f")
done
wait
for f in "${started[@]}"; do
  echo "=== $f: ${seconds}s"
  tail -n 12 "$scratch/$f.log"
  status=$(cat "$scratch/$f.status")
  if [ "$status" -ne 0 ]; then
    cp "$scratch/$f.log" "$findings/$f.log"
    failed+=("$f (exit $status; log $findings/$f.log; reproducer(s): $(ls "$findings"/"$f"-* 2>/dev/null | tr '\n' ' '))")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "run_fuzzers: FAILED:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "run_fuzzers: all ${#fuzzers[@]} fuzzers ran ${seconds}s without findings"
