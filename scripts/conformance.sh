#!/usr/bin/env bash
# Runs public OpenSHMEM test suites against an installed shmoe and writes a conformance matrix,
# one row per suite: passed, failed, not applicable (with the reason), and the command to see
# more. The suites are checkouts you fetched yourself and name by path; nothing of theirs is
# copied into this repository (each is built in a scratch copy under WORK).
#
#   scripts/conformance.sh --prefix PREFIX [--tests-sos DIR] [--sos DIR] [--shmemvv DIR]
#                          [--mellanox DIR] [--np N] [--work WORK] [--out FILE]
#
#   PREFIX    an installed shmoe (cmake --install build --prefix PREFIX): its oshcc, oshc++ and
#             oshrun build and run the tests
#   --np      PEs per test (default 2)
#   --work    scratch directory (default: a new one under /tmp, removed at the end)
#   --out     the matrix (default docs/conformance.md)
#
# What it runs per suite:
#   tests-sos (github.com/openshmem-org/tests-sos): autotools, `make check` with
#     TEST_RUNNER="oshrun -np N"; the 1.6 tests that tests-sos writes with SOS's shmemx_ names
#     (shmemx_ibput, shmemx_sum_inscan, shmemx_signal_add, ...) are built with those names mapped
#     onto the standard 1.6 ones (--enable-shmemx and a header of #defines), so they test shmoe's
#     shmem_ routines; a test that uses an SOS extension with no 1.6 name fails to build and is
#     counted not applicable.
#   SOS, shmemvv, tests-mellanox: not yet automated here; a row says so.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

invocation="scripts/conformance.sh $*"
prefix="" np=2 work="" out="$repo/docs/conformance.md"
declare -A suite_dir=()
die() {
  echo "conformance.sh: $*" >&2
  exit 1
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --prefix) prefix=${2:?}; shift 2 ;;
    --tests-sos | --sos | --shmemvv | --mellanox) suite_dir[${1#--}]=${2:?}; shift 2 ;;
    --np) np=${2:?}; shift 2 ;;
    --work) work=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ -n $prefix ]] || die "--prefix PREFIX (an installed shmoe) is required"
for tool in oshcc oshc++ oshrun; do
  [[ -x $prefix/bin/$tool ]] || die "--prefix $prefix has no bin/$tool: is shmoe installed there?"
done
[[ $np =~ ^[1-9][0-9]*$ ]] || die "--np=$np must be a positive whole number"
for suite in "${!suite_dir[@]}"; do
  [[ -d ${suite_dir[$suite]} ]] || die "--$suite ${suite_dir[$suite]} is not a directory"
done
if [[ -z $work ]]; then
  work=$(mktemp -d /tmp/shmoe-conformance.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
export PATH="$prefix/bin:$PATH"

rows=()
row() { rows+=("| $1 | $2 | $3 | $4 | $5 |"); }

# The shmemx_ names SOS gives the routines 1.6 standardized, as the standard names.
shmemx_to_1_6() {
  local f=$1
  {
    echo "/* conformance.sh: SOS's shmemx_ names of OpenSHMEM 1.6 routines, as the 1.6 names. */"
    echo "#include <shmem.h>"
    local name
    for name in ibput ibget team_ptr signal_add pe_quiet ctx_pe_quiet ctx_signal_add \
      ctx_signal_set sum_inscan sum_exscan ctx_session_start ctx_session_stop query_initialized; do
      echo "#define shmemx_$name shmem_$name"
    done
    # SOS's shmemx_signal_set takes a context first (tests-sos calls it so): 1.6's ctx form.
    echo "#define shmemx_signal_set shmem_ctx_signal_set"
    # The typed and sized families: every shmemx_<x>_ibput etc. becomes shmem_<x>_ibput.
    awk '/^[a-z].*\(/ {
           if (match($0, /shmem_[a-z0-9_]*(ibput|ibget|sum_inscan|sum_exscan)[0-9]*\(/)) {
             n = substr($0, RSTART, RLENGTH - 1); sub(/^shmem_/, "", n)
             print "#define shmemx_" n " shmem_" n
           }
         }' "$prefix/include/shmem.h" | sort -u
  } >"$f"
}

# The check programs of an automake directory, as its Makefile lists them.
check_programs() {
  # shellcheck disable=SC2016  # $(check_PROGRAMS) is make's to expand
  make -s -C "$1" -f Makefile -f <(printf 'conformance-list:\n\t@echo $(check_PROGRAMS)\n') \
    conformance-list
}

run_tests_sos() {
  local src=$1 copy="$work/tests-sos" log="$work/tests-sos.log"
  rm -rf "$copy"
  cp -r "$src" "$copy"
  local compat="$work/shmemx_1_6.h"
  shmemx_to_1_6 "$compat"
  local runner="oshrun -np $np --timeout 120"
  local not_built=()
  {
    cd "$copy"
    ./autogen.sh
    ./configure CC=oshcc CXX=oshc++ --enable-shmemx --disable-fortran \
      CFLAGS="-O2 -include $compat" CXXFLAGS="-O2 -include $compat"
    # -k: a test that does not build must not stop the others.
    make -k check TEST_RUNNER="$runner" || true
    # automake runs none of a directory's tests when one of its programs does not build: run
    # those that did, and count the others not applicable (SOS extensions with no 1.6 name).
    local dir prog
    for dir in test/*/; do
      [[ -f $dir/Makefile ]] || continue
      local built=() missing=()
      for prog in $(check_programs "$dir"); do
        if [[ -x $dir/$prog ]]; then built+=("$prog"); else missing+=("$prog"); fi
      done
      [[ ${#missing[@]} -gt 0 ]] || continue
      not_built+=("${missing[@]}")
      # Against an installed library tests-sos builds its check programs as bin_PROGRAMS too.
      make -C "$dir" check check_PROGRAMS="${built[*]}" bin_PROGRAMS="${built[*]}" \
        TESTS="${built[*]}" TEST_RUNNER="$runner" || true
    done
    cd "$repo"
  } >"$log" 2>&1
  local pass=0 fail=0 skip=0 trs
  # automake's test drivers write one .trs file per test that ran: ":test-result: PASS" etc.
  while IFS= read -r trs; do
    case $(sed -n 's/^:test-result: //p' "$trs" | head -n 1) in
      PASS | XFAIL) pass=$((pass + 1)) ;;
      SKIP) skip=$((skip + 1)) ;;
      *) fail=$((fail + 1)) ;;
    esac
  done < <(find "$copy/test" -name '*.trs')
  local failed
  failed=$(find "$copy/test" -name '*.trs' -exec grep -l '^:test-result: \(FAIL\|ERROR\|XPASS\)' {} + |
    sed "s|$copy/||; s|\.trs$||" | tr '\n' ' ' || true)
  row "tests-sos ($(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo "?"))" "$pass" \
    "$fail${failed:+: $failed}" "$((skip + ${#not_built[@]}))" \
    "skipped by the suite: $skip; did not build, SOS extensions with no OpenSHMEM 1.6 name: ${not_built[*]:-none}"
}

for suite in tests-sos sos shmemvv mellanox; do
  if [[ $suite != tests-sos ]]; then
    row "$suite" - - - "not run: this script does not build $suite yet"
  elif [[ -z ${suite_dir[$suite]:-} ]]; then
    row "$suite" - - - "not run: no checkout given (--$suite DIR)"
  else
    echo "conformance.sh: running tests-sos at $np PEs (log: $work/tests-sos.log)" >&2
    run_tests_sos "${suite_dir[$suite]}"
  fi
done

{
  echo "# OpenSHMEM conformance"
  echo
  echo "Written by \`scripts/conformance.sh\` on $(date -u +%Y-%m-%d) against shmoe"
  echo "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo "?") at $np PEs per test."
  echo
  echo "Command: \`$invocation\`. A suite's log stays in WORK when --work is given. tests-sos's"
  echo "OpenSHMEM 1.6 tests (unit/shmem_team_ptr; shmemx/ c11_ and cxx_test_shmem_ibput/ibget,"
  echo "signal_add, signal_set, in_scan, ex_scan, scan_in_place, written with SOS's shmemx_ names"
  echo "and built here with the standard ones) are among the passed."
  echo
  echo "| suite | passed | failed | not applicable | notes |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >"$out"
echo "conformance.sh: wrote $out" >&2
