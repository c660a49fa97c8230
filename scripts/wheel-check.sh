#!/usr/bin/env bash
# Checks the wheel as a user meets it: builds it (`pip wheel .`, or takes WHEEL), installs it into
# a fresh venv with the torch that python/requirements.txt pins, and there, away from the
# checkout: shmoe-config --diagnose; an OpenSHMEM hello built with the venv's oshcc, run by its
# oshrun at 2 and 4 PEs; find_package(shmoe) from a CMake project; a deep_ep normal-mode and a
# low-latency FP8 program under torchrun at 2 ranks; no path of the checkout or of the build in
# the installed files; and, the venv moved to another folder, the tools and hello again.
#
#   scripts/wheel-check.sh [WHEEL]      (PYTHON: the interpreter for the venv, default python3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d /tmp/shmoe-wheel-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
step() { echo "== wheel-check: $*"; }

wheel=${1:-}
if [ -z "$wheel" ]; then
  step "pip wheel $root"
  start=$SECONDS
  "$("$root/scripts/venv.sh")" -m pip wheel -q --no-deps -w "$work/dist" "$root"
  wheel=$(ls "$work"/dist/shmoe-*.whl)
  echo "built $(basename "$wheel") in $((SECONDS - start)) s"
fi
echo "wheel: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB"

step "pip install into a fresh venv"
"$python" -m venv "$work/env"
torch_pin=$(grep -E '^torch==' "$root/python/requirements.txt")
start=$SECONDS
"$work/env/bin/pip" install -q "$wheel" "$torch_pin"
echo "installed in $((SECONDS - start)) s"

cp "$root"/examples/python/{launch,deep_ep_normal,deep_ep_low_latency}.py "$work/"
cat >"$work/hello.c" <<'C'
#include <shmem.h>
#include <stdio.h>
int main(void) {
  shmem_init();
  static long token = -1;
  long mine = shmem_my_pe();
  shmem_long_p(&token, mine, (shmem_my_pe() + 1) % shmem_n_pes());
  shmem_barrier_all();
  int from = (shmem_my_pe() + shmem_n_pes() - 1) % shmem_n_pes();
  printf("hello from PE %d of %d: %s\n", shmem_my_pe(), shmem_n_pes(),
         token == from ? "ok" : "WRONG");
  shmem_finalize();
  return token == from ? 0 : 1;
}
C
cat >"$work/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.22)
project(hello_cmake C)
find_package(shmoe REQUIRED)
add_executable(hello_cmake hello.c)
target_link_libraries(hello_cmake PRIVATE shmoe::shmoe)
CMAKE

# Runs the checks with the venv at $1, from the folder $work, with nothing of the checkout on
# any path.
check_env() {
  local env=$1 n out
  (
    cd "$work"
    export PATH="$env/bin:/usr/bin:/bin" PYTHONPATH="" OMP_NUM_THREADS=1
    step "shmoe-config --diagnose ($env)"
    shmoe-config --diagnose
    step "oshcc hello.c; oshrun at 2 and 4 PEs"
    oshcc hello.c -o hello
    for n in 2 4; do
      out=$(oshrun -n $n ./hello)
      echo "$out"
      [ "$(grep -c ': ok$' <<<"$out")" -eq $n ] || { echo "FAIL: hello at $n PEs"; exit 1; }
    done
    step "find_package(shmoe) with CMAKE_PREFIX_PATH=\$(shmoe-config --prefix)"
    rm -rf build-cmake
    cmake -S . -B build-cmake -DCMAKE_PREFIX_PATH="$(shmoe-config --prefix)" >/dev/null
    cmake --build build-cmake >/dev/null
    out=$(oshrun -n 2 build-cmake/hello_cmake)
    [ "$(grep -c ': ok$' <<<"$out")" -eq 2 ] || { echo "FAIL: $out"; exit 1; }
    step "torchrun --nproc_per_node 2: deep_ep normal and low-latency FP8"
    for program in deep_ep_normal.py deep_ep_low_latency.py; do
      out=$(torchrun --standalone --nproc_per_node 2 "$program" 2>&1) || { echo "$out"; exit 1; }
      echo "$out" | grep '^rank '
      [ "$(grep -c '^rank [01]/2: ' <<<"$out")" -eq 2 ] || { echo "FAIL: $out"; exit 1; }
    done
  )
}
check_env "$work/env"

step "no path of the checkout or the build in the installed files"
# The files the wheel installed (its RECORD), against the checkout and the temporary folders pip
# and scikit-build-core build in.
site=$(ls -d "$work"/env/lib/python3*/site-packages)
leaks=0
while IFS=, read -r file _; do
  case $file in *.dist-info/*) continue ;; esac  # pip's own records (direct_url.json names the wheel)
  path=$(cd "$site" && realpath -m "$file")
  [ -f "$path" ] || continue
  if grep -aqF -e "$root" -e '/tmp/tmp' -e '/tmp/pip-' "$path"; then
    echo "FAIL: $path names a path of the build:"
    grep -aoF -e "$root" -e '/tmp/tmp' -e '/tmp/pip-' "$path" | sort -u
    leaks=1
  fi
done <"$(ls "$site"/shmoe-*.dist-info/RECORD)"
[ $leaks -eq 0 ] || exit 1

step "the venv moved"
mv "$work/env" "$work/moved"
(
  cd "$work"
  export PATH="$work/moved/bin:/usr/bin:/bin"
  [ "$(shmoe-config --prefix)" = "$work/moved" ] || { echo "FAIL: prefix $(shmoe-config --prefix)"; exit 1; }
  shmoe-config --diagnose >/dev/null
  oshcc hello.c -o hello_moved
  oshrun -n 2 ./hello_moved
)
step "passed"
