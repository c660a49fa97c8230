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
#   SOS (github.com/Sandia-OpenSHMEM/SOS): since 2024 SOS has no tests of its own: its `make
#     check` builds the tests-sos submodule (modules/tests-sos) at the commit SOS pins. That
#     commit is run as tests-sos is, from DIR/modules/tests-sos when the submodule is checked
#     out, else from the --tests-sos checkout's history (git archive of the pinned commit).
#   shmemvv (github.com/michael-beebe/shmemvv): CMake with oshcc, then every C and C11 test
#     program at N PEs, one oshrun each; a test passes when every PE exits 0 and PE 0 prints
#     PASSED and no FAILED.
#   tests-mellanox (github.com/openshmem-org/tests-mellanox): verifier/ built with oshcc
#     (--enable-active-sets: only the PEs of a collective's active set call it, as OpenSHMEM
#     requires; --disable-mpi), then `oshrun -np N oshmem_test exec --task=SUITE:CASE` for every
#     case that `oshmem_test exec --info=case` lists, one oshrun each, so that a case that ends
#     the job costs only itself.
#   Every test runs under `oshrun --timeout` (120 s; 180 s for tests-mellanox's cases): a hang
#   fails. A failure the suite itself causes (a race in the test, a result the specification
#   leaves undefined) is counted not applicable only when it fails that known way, with the
#   reason in the notes; every other failure counts failed.
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
    -h | --help) sed -n '2,41p' "$0"; exit 0 ;;
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
# tests-sos (also run for --sos) and tests-mellanox are autotools projects built from git:
# their autogen.sh needs autoconf, automake and libtool (Debian: apt-get install autoconf
# automake libtool), which shmoe's own build does not.
if [[ -n ${suite_dir[tests-sos]:-}${suite_dir[sos]:-}${suite_dir[mellanox]:-} ]]; then
  for tool in autoreconf automake libtoolize; do
    command -v "$tool" >/dev/null ||
      die "$tool is missing: tests-sos and tests-mellanox need autoconf, automake and libtool"
  done
fi
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

# Runs a tests-sos tree (SRC, copied to WORK/NAME) and adds its row, labelled LABEL.
run_tests_sos() {
  local name=$1 src=$2 label=$3
  local copy="$work/$name" log="$work/$name.log"
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
  row "$label" "$pass" \
    "$fail${failed:+: $failed}" "$((skip + ${#not_built[@]}))" \
    "skipped by the suite: $skip; did not build, SOS extensions with no OpenSHMEM 1.6 name: ${not_built[*]:-none}"
}

short_commit() { git -C "$1" rev-parse --short HEAD 2>/dev/null || echo "?"; }

# SOS's tests: the tests-sos commit SOS pins as its modules/tests-sos submodule.
run_sos() {
  local src=$1 tests pinned
  pinned=$(git -C "$src" rev-parse HEAD:modules/tests-sos 2>/dev/null) || pinned=""
  if [[ -f $src/modules/tests-sos/test/Makefile.am ]]; then
    tests=$src/modules/tests-sos
  elif [[ -n $pinned && -n ${suite_dir[tests-sos]:-} ]] &&
    git -C "${suite_dir[tests-sos]}" cat-file -e "$pinned^{commit}" 2>/dev/null; then
    tests="$work/sos-tests-sos-src"
    rm -rf "$tests"
    mkdir -p "$tests"
    git -C "${suite_dir[tests-sos]}" archive "$pinned" | tar -x -C "$tests"
  elif [[ -f $src/test/Makefile.am ]]; then
    row "sos ($(short_commit "$src"))" - - - "not run: this SOS keeps its tests in test/ (before \
1.5.3), built only together with SOS; give an SOS with the modules/tests-sos submodule"
    return
  else
    row "sos ($(short_commit "$src"))" - - - "not run: modules/tests-sos is not checked out and \
its pinned commit ${pinned:-?} is not in a --tests-sos checkout's history"
    return
  fi
  run_tests_sos sos "$tests" \
    "sos ($(short_commit "$src"); its tests: tests-sos ${pinned:0:7}, the submodule it pins)"
}

# Why a shmemvv test that fails in a known way of its own is not applicable: name|how|reason.
# how: any (every failure) or exit0 (PE 0 prints FAILED while every PE exited 0).
shmemvv_known=(
  "c_shmem_info_get_version|any|requires OpenSHMEM 1.5 exactly (major 1, minor 5), shmoe \
implements 1.6 and reports 1.6"
  "c11_shmem_sync_all|exit0|PE 0 reads every PE's result with shmem_g before the others have \
stored it (no barrier between), so it may print FAILED while every PE's checks passed"
)

run_shmemvv() {
  local src=$1 copy="$work/shmemvv" log="$work/shmemvv.log"
  rm -rf "$copy"
  cp -r "$src" "$copy"
  local pass=0 fail=0 failed=() na=() unbuilt=()
  {
    # c_shmem_reduce and c11_shmem_reduce call libm without linking it: -lm after every link.
    cmake -S "$copy" -B "$copy/build" -G "Unix Makefiles" -DCMAKE_C_COMPILER=oshcc \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_STANDARD_LIBRARIES=-lm
    cmake --build "$copy/build" -- -k -j2 || true
  } >"$log" 2>&1
  export SHMEMVV_LOG_DIR="$copy/logs/"
  mkdir -p "$SHMEMVV_LOG_DIR"
  local source test exe out rc known name how reason verdict
  # One test per source file of src/unit/c*/CATEGORY/; the build puts it in build/bin/CATEGORY.
  while IFS= read -r source; do
    test=$(basename "$source" .c)
    exe=$(find "$copy/build/bin" -type f -name "$test" -perm -u+x | head -n 1)
    if [[ -z $exe ]]; then
      fail=$((fail + 1)) unbuilt+=("$test")
      continue
    fi
    rc=0
    out=$(timeout 150 oshrun -np "$np" --timeout 120 "$exe" 2>&1) || rc=$?
    printf '== %s (exit %s)\n%s\n' "$test" "$rc" "$out" >>"$log"
    if [[ $rc -eq 0 ]] && grep -q PASSED <<<"$out" && ! grep -q FAILED <<<"$out"; then
      pass=$((pass + 1))
      continue
    fi
    verdict=failed
    for known in "${shmemvv_known[@]}"; do
      IFS='|' read -r name how reason <<<"$known"
      [[ $name == "$test" ]] || continue
      if [[ $how == any || ($how == exit0 && $rc -eq 0) ]]; then verdict="n/a"; fi
    done
    if [[ $verdict == n/a ]]; then na+=("$test"); else fail=$((fail + 1)) failed+=("$test"); fi
  done < <(find "$copy/src/unit" -mindepth 3 -name '*.c' | sort)
  local notes="C and C11 tests, one program each" entry
  for entry in "${shmemvv_known[@]}"; do
    IFS='|' read -r name how reason <<<"$entry"
    if [[ " ${na[*]} " == *" $name "* ]]; then notes+="; n/a $name: $reason"; fi
  done
  [[ ${#unbuilt[@]} -eq 0 ]] || notes+="; did not build (counted failed): ${unbuilt[*]}"
  row "shmemvv ($(short_commit "$src"))" "$pass" "$fail${failed[*]:+: ${failed[*]}}" \
    "${#na[@]}" "$notes"
}

# Why a tests-mellanox case that fails in a known way of its own is not applicable:
# suite:case|reason (it is counted n/a when it fails; when it passes, passed).
mellanox_known=(
  "basic:shmalloc|its realloc item expects shmem_realloc of a freed pointer to return NULL, as \
Open MPI does; OpenSHMEM leaves that undefined and shmoe ends the job naming the pointer"
)

run_mellanox() {
  local src=$1 copy="$work/mellanox" log="$work/mellanox.log"
  rm -rf "$copy"
  cp -r "$src/verifier" "$copy"
  # The nbi cases include mpi.h and use nothing from it.
  local stub="$work/mpi-stub"
  mkdir -p "$stub"
  echo "/* conformance.sh: tests-mellanox's nbi cases include mpi.h and use nothing of it */" \
    >"$stub/mpi.h"
  {
    cd "$copy"
    ./autogen.sh
    # The NBI check looks for Open MPI's liboshmem: oshcc links shmoe, which has the routines.
    ./configure CC=oshcc CFLAGS="-O2 -I$stub" --disable-mpi --enable-active-sets \
      ac_cv_lib_oshmem_shmem_getmem_nbi=yes
    make -j2 || true
    cd "$repo"
  } >"$log" 2>&1
  if [[ ! -x $copy/oshmem_test ]]; then
    row "mellanox ($(short_commit "$src"))" - - - "not run: oshmem_test did not build (see $log)"
    return
  fi
  local cases
  cases=$(oshrun -np 1 --timeout 60 "$copy/oshmem_test" exec --info=case --no-colour 2>&1 |
    awk '/^   [a-z]/ { suite = $1 } /^      [a-z]/ { print suite ":" $1 }')
  local pass=0 fail=0 failed=() na=() c out rc line known reason
  for c in $cases; do
    rc=0
    out=$(timeout 210 oshrun -np "$np" --timeout 180 "$copy/oshmem_test" exec --no-colour \
      --task="$c" 2>&1) || rc=$?
    printf '== %s (exit %s)\n%s\n' "$c" "$rc" "$out" >>"$log"
    # The verifier prints one line per case: RESULT SUITE CASE NOTE.
    line=$(grep -E '^[A-Z]+ +[a-z]' <<<"$out" | head -n 1 || true)
    if [[ $rc -eq 0 && $line == PASS* ]]; then
      pass=$((pass + 1))
      continue
    fi
    reason=""
    for known in "${mellanox_known[@]}"; do
      [[ ${known%%|*} == "$c" ]] && reason=${known#*|}
    done
    if [[ -n $reason || $line == SKIP* ]]; then na+=("$c"); else fail=$((fail + 1)) failed+=("$c"); fi
  done
  # The mix suite (OpenSHMEM with MPI) needs MPI: configured out.
  local mix
  mix=$(grep -c '{ *NULL, *osh_mix_tc' "$copy/mix/osh_mix.c" || true)
  local notes entry
  notes="all $(wc -w <<<"$cases") cases that oshmem_test lists, analysis included"
  for entry in "${mellanox_known[@]}"; do
    if [[ " ${na[*]} " == *" ${entry%%|*} "* ]]; then notes+="; n/a ${entry%%|*}: ${entry#*|}"; fi
  done
  notes+="; n/a mix (${mix} cases): OpenSHMEM together with MPI, and shmoe has no MPI"
  row "mellanox ($(short_commit "$src"))" "$pass" "$fail${failed[*]:+: ${failed[*]}}" \
    "$((${#na[@]} + mix))" "$notes"
}

for suite in tests-sos sos shmemvv mellanox; do
  if [[ -z ${suite_dir[$suite]:-} ]]; then
    row "$suite" - - - "not run: no checkout given (--$suite DIR)"
    continue
  fi
  echo "conformance.sh: running $suite at $np PEs (log: $work/$suite*.log)" >&2
  case $suite in
    tests-sos)
      run_tests_sos tests-sos "${suite_dir[$suite]}" \
        "tests-sos ($(short_commit "${suite_dir[$suite]}"))"
      ;;
    sos) run_sos "${suite_dir[$suite]}" ;;
    shmemvv) run_shmemvv "${suite_dir[$suite]}" ;;
    mellanox) run_mellanox "${suite_dir[$suite]}" ;;
  esac
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
  echo "and built here with the standard ones) are among the passed. SOS has no tests of its own"
  echo "since 2024: its \`make check\` builds the tests-sos commit it pins, run here the same way."
  echo "shmemvv counts one test per program (C and C11), tests-mellanox one per case of"
  echo "\`oshmem_test\`, each its own oshrun. A test that hangs fails at its timeout. Each n/a is"
  echo "a test that failed in a way the notes give (the suite's own bug, behaviour the"
  echo "specification leaves undefined, or a part the suite builds only with SOS or MPI)."
  echo
  echo "| suite | passed | failed | not applicable | notes |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >"$out"
echo "conformance.sh: wrote $out" >&2
