#!/usr/bin/env bash
# Builds shmoe with a sanitizer into build-SANITIZER/ and runs the tests under it.
#   scripts/sanitize.sh address|thread [ctest arguments...]
# SHMOE_SANITIZE_TARGETS="t1 t2 ..." builds only those targets (then select their tests with
# ctest's -R or -L), for a quicker run on a subset.
# address = AddressSanitizer + UndefinedBehaviorSanitizer (its cheaper checks: CMakeLists.txt);
# thread = ThreadSanitizer (it sees the worker threads of a PE; what PEs share across processes
# is outside its view).
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?usage: scripts/sanitize.sh address|thread [ctest args]}
shift
dir=build-$kind
# Warnings are errors in the ordinary build (test.sh); here they are not, because GCC 12 under
# -fsanitize reports false -Wmaybe-uninitialized in libstdc++ headers (std::regex, std::function).
# The Python package is left out: a sanitized extension module needs the sanitizer's runtime
# loaded before the (uninstrumented) interpreter starts, which a test cannot arrange portably.
# -O1 -g1 (line tables: enough for symbolized reports) compiles in much less time than -O2 -g,
# which is what keeps CI's sanitizer stages within its time on 2 cores.
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMOE_WERROR=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DSHMOE_SANITIZE="$kind" -DSHMOE_BUILD_BENCH=OFF -DSHMOE_BUILD_PYTHON=OFF >/dev/null
if [[ -n ${SHMOE_SANITIZE_TARGETS:-} ]]; then
  # shellcheck disable=SC2086  # a list of target names
  cmake --build "$dir" -j "$(nproc)" --target $SHMOE_SANITIZE_TARGETS
else
  cmake --build "$dir" -j "$(nproc)"
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1}
if [[ $kind == thread ]]; then
  # UCX's memory hooks (it patches mmap and malloc to track registered memory) crash a
  # ThreadSanitizer process at start. shmoe registers its heap segment once and for the PE's life,
  # so it never needs them.
  export UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no
fi
ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" "$@"
