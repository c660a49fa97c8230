#!/usr/bin/env bash
# The standard OpenSHMEM tool names, used the way a build outside shmoe uses them:
#   run.sh CASE BUILD_DIR WORK_DIR LIBDIR C_COMPILER [FLAGS]
# `prefix` (the fixture of the others) installs BUILD_DIR into WORK_DIR/staging and moves it to
# WORK_DIR/prefix, so every later case works from a prefix that is not where it was installed.
# The other cases build ring_put.c / ring_put.cpp with oshcc, oshc++, pkg-config or CMake, and
# run them with oshrun: each PE must report "PE r/N: ok" (the data its neighbour put matched).
# `headers` checks the installed headers (flat prototypes) and the library's exported symbols;
# `moe_api` builds and runs C and C++ programs of the installed MoE API (moe_roundtrip.c,
# moe_layer.cpp), which check their results against references of their own.
# FLAGS go to every compile and link: a sanitizer build's library needs its runtime in the program.
set -euo pipefail
case_name=$1
build=$(cd "$2" && pwd)
mkdir -p "$3"
work=$(cd "$3" && pwd)
libdir=$4
cc=$5
read -r -a flags <<<"${6:-}"

here=$(cd "$(dirname "$0")" && pwd)
prefix=$work/prefix
scratch=$work/case.$case_name
rm -rf "$scratch"
mkdir -p "$scratch"
cd "$scratch"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# A job of N PEs with `launcher ARGS...`: exit status 0, and "PE r/N: ok" from every r.
expect_job() {
  local n=$1 log
  shift
  log=$scratch/job.log
  echo "+ $*"
  local status=0
  "$@" >"$log" 2>&1 || status=$?
  cat "$log"
  [ $status -eq 0 ] || fail "'$*' exited $status"
  local r
  for ((r = 0; r < n; r++)); do
    grep -qx "PE $r/$n: ok" "$log" || fail "'$*': no 'PE $r/$n: ok'"
  done
  [ "$(grep -c ': ok$' "$log")" -eq "$n" ] || fail "'$*': not exactly $n PEs reported"
}

# `text` must (or with !, must not) contain `pattern` (a fixed string).
expect_in() {
  local what=$1 text=$2 pattern=$3
  grep -qF -- "$pattern" <<<"$text" || fail "$what: '$pattern' not in: $text"
}
expect_not_in() {
  local what=$1 text=$2 pattern=$3
  if grep -qF -- "$pattern" <<<"$text"; then fail "$what: '$pattern' in: $text"; fi
}

# No libshmoe.so among the shared objects `program` names: it links the archive.
expect_static() {
  local needed
  needed=$(readelf -d "$1" | grep NEEDED) || fail "readelf -d $1 found no NEEDED entries"
  expect_not_in "$1's NEEDED entries" "$needed" libshmoe
}

osh=$prefix/bin
run=(timeout 120 "$osh/oshrun" --timeout 60)

case $case_name in
  prefix)
    rm -rf "$work/staging" "$prefix"
    cmake --install "$build" --prefix "$work/staging" >"$scratch/install.log" ||
      fail "cmake --install failed: $(cat "$scratch/install.log")"
    mv "$work/staging" "$prefix"
    for f in bin/oshcc bin/oshc++ bin/oshcxx bin/oshCC bin/oshrun bin/shmoerun \
      "$libdir/libshmoe.a" "$libdir/pkgconfig/shmoe.pc" "$libdir/cmake/shmoe/shmoeConfig.cmake" \
      "$libdir/cmake/shmoe/shmoeConfigVersion.cmake"; do
      [ -x "$prefix/$f" ] || [ -f "$prefix/$f" ] || fail "the install has no $f"
    done
    [ "$(readlink "$prefix/bin/oshrun")" = shmoerun ] || fail "bin/oshrun is not a link to shmoerun"
    # No file the tools read may name the build tree or the place of the install.
    leaks=$(grep -rlF -e "$build" -e "$work/staging" "$prefix/bin/oshcc" "$prefix/bin/oshc++" \
      "$prefix/$libdir/pkgconfig" "$prefix/$libdir/cmake" || true)
    [ -z "$leaks" ] || fail "these installed files name the build tree or the first prefix: $leaks"
    ;;

  oshcc)
    "$osh/oshcc" "${flags[@]}" -O2 -Wall -Werror "$here/ring_put.c" -o ring_put
    expect_job 4 "${run[@]}" -n 4 ./ring_put
    expect_job 2 "${run[@]}" -np 2 ./ring_put
    expect_job 3 "${run[@]}" --np 3 ./ring_put
    # The launcher people already have: Open MPI's mpirun, no variable of ours (PMIx bootstrap).
    command -v mpirun >/dev/null || fail "mpirun is not installed (install-deps.sh installs it)"
    expect_job 4 env -u SHMOE_STORE OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      timeout 120 mpirun --oversubscribe -np 4 ./ring_put
    # Compile and link as separate steps, as make does.
    "$osh/oshcc" "${flags[@]}" -c "$here/ring_put.c" -o ring_put.o
    "$osh/oshcc" "${flags[@]}" ring_put.o -o ring_put_from_object
    expect_job 2 "${run[@]}" -np 2 ./ring_put_from_object
    # -np is the launcher's only; the program's own arguments pass as given.
    out=$("${run[@]}" -np 2 /bin/echo -np 5 -n)
    [ "$(grep -cx -- '-np 5 -n' <<<"$out")" -eq 2 ] || fail "the program's -np changed: $out"

    show=$("$osh/oshcc" -showme "$here/ring_put.c" -o x)
    expect_in "oshcc -showme" "$show" "-I$prefix/include"
    expect_in "oshcc -showme" "$show" "-lshmoe"
    expect_in "oshcc -showme" "$show" "-Wl,-rpath,$prefix/$libdir"
    for only in -c -E -S -M -MM; do
      show=$("$osh/oshcc" --showme "$only" "$here/ring_put.c")
      expect_in "oshcc --showme $only" "$show" "-I$prefix/include"
      expect_not_in "oshcc --showme $only" "$show" "-lshmoe"
    done
    show=$("$osh/oshcc" -showme -c '-DGREETING="a b"' x.c)
    expect_in "an argument with a space" "$show" "'-DGREETING=\"a b\"'"
    [ "$("$osh/oshcc" -showme:compile)" = "-I$prefix/include" ] || fail "-showme:compile"
    expect_in "-showme:link" "$("$osh/oshcc" -showme:link)" "-L$prefix/$libdir"
    show=$(SHMOE_CC="/bin/echo chosen-cc" "$osh/oshcc" -c x.c)
    [ "$show" = "chosen-cc -I$prefix/include -c x.c" ] || fail "SHMOE_CC was not used: $show"
    ;;

  oshcxx)
    "$osh/oshc++" "${flags[@]}" -std=c++20 -O2 -Wall -Werror "$here/ring_put.cpp" -o ring_put
    expect_job 4 "${run[@]}" -n 4 ./ring_put
    expect_job 2 "${run[@]}" -np 2 ./ring_put
    for alias in oshcxx oshCC; do
      [ "$("$osh/$alias" -showme x.cpp)" = "$("$osh/oshc++" -showme x.cpp)" ] ||
        fail "$alias is not oshc++"
    done
    show=$(SHMOE_CXX="/bin/echo chosen-cxx" "$osh/oshc++" -c x.cpp)
    [ "$show" = "chosen-cxx -I$prefix/include -c x.cpp" ] || fail "SHMOE_CXX was not used: $show"
    ;;

  static)
    "$osh/oshcc" "${flags[@]}" -static-shmoe "$here/ring_put.c" -o ring_put
    expect_static ring_put
    expect_job 2 "${run[@]}" -np 2 ./ring_put
    "$osh/oshc++" "${flags[@]}" -static-shmoe -std=c++20 "$here/ring_put.cpp" -o ring_put_cxx
    expect_static ring_put_cxx
    expect_job 2 "${run[@]}" -np 2 ./ring_put_cxx
    ;;

  pkgconfig)
    export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
    [ "$(cd "$(pkg-config --variable=prefix shmoe)" && pwd -P)" = "$(cd "$prefix" && pwd -P)" ] ||
      fail "shmoe.pc's prefix is $(pkg-config --variable=prefix shmoe), not $prefix"
    # shellcheck disable=SC2046  # the flags are words
    "$cc" "${flags[@]}" "$here/ring_put.c" $(pkg-config --cflags --libs shmoe) -o ring_put
    expect_job 2 "${run[@]}" -np 2 ./ring_put
    # Static, the pkg-config way: the archive, then what --static lists besides -lshmoe.
    static_libs=$(pkg-config --static --libs shmoe | sed 's/ -lshmoe / /')
    # shellcheck disable=SC2046,SC2086
    "$cc" "${flags[@]}" "$here/ring_put.c" $(pkg-config --cflags shmoe) \
      "$prefix/$libdir/libshmoe.a" $static_libs -o ring_put_static
    expect_static ring_put_static
    expect_job 2 "${run[@]}" -np 2 ./ring_put_static
    ;;

  cmake)
    cmake -S "$here/consumer" -B consumer -G Ninja -DCMAKE_C_COMPILER="$cc" \
      -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="${flags[*]}" \
      -DCMAKE_EXE_LINKER_FLAGS="${flags[*]}" >configure.log ||
      fail "configuring the consumer project failed: $(cat configure.log)"
    found=$(grep 'shmoe .* found in' configure.log)
    expect_in "find_package(shmoe)" "$found" "$prefix/$libdir/cmake/shmoe"
    cmake --build consumer
    expect_job 2 "${run[@]}" -np 2 consumer/ring_put_shared
    expect_static consumer/ring_put_static
    expect_job 2 "${run[@]}" -np 2 consumer/ring_put_static
    ;;

  headers)
    # The installed shmem.h and pshmem.h are flat prototypes (generated from cmake/api/functions.h,
    # which is not installed), and libshmoe.so exports those and the shmoe API only.
    inc=$prefix/include
    grep -qxF 'void shmem_long_put(long *dest, const long *source, size_t nelems, int pe);' \
      "$inc/shmem.h" || fail "the installed shmem.h has no prototype of shmem_long_put"
    grep -qxF 'uint64_t pshmem_uint64_atomic_fetch_add(uint64_t *dest, uint64_t value, int pe);' \
      "$inc/pshmem.h" || fail "the installed pshmem.h has no prototype of pshmem_uint64_atomic_fetch_add"
    for h in shmem.h pshmem.h; do
      left=$(grep -nE 'SHMOE_(F|DECL_[A-Z_]*)\(|##|#include "shmoe/functions\.h"|@[A-Z_]+@' \
        "$inc/$h" || true)
      [ -z "$left" ] || fail "the installed $h has declaration macros left: $left"
    done
    [ ! -e "$inc/shmoe/functions.h" ] || fail "shmoe/functions.h (the generator's input) is installed"
    n=$(grep -cE '^[a-z].*\bshmem_[a-z0-9_]+\(.*\);$' "$inc/shmem.h")
    [ "$n" -gt 1500 ] || fail "the installed shmem.h has $n prototypes, not the whole API"
    # Every header compiles alone, as C11 and C++ (pedantic, warnings as errors).
    for h in shmem.h pshmem.h shmemx.h shmoe/moe.h shmoe/moe.hpp; do
      if [ "$h" != shmoe/moe.hpp ]; then
        echo "#include <$h>" | "$cc" -std=c11 -pedantic -Wall -Wextra -Werror -fsyntax-only \
          -I"$inc" -x c - || fail "$h does not compile alone as C11"
      fi
      echo "#include <$h>" | "$osh/oshc++" -std=c++17 -pedantic -Wall -Wextra -Werror \
        -fsyntax-only -c -x c++ - || fail "$h does not compile alone as C++17"
    done
    "$here/../api/exported_symbols.sh" "$prefix/$libdir/libshmoe.so" "$inc"
    ;;

  moe_api)
    # The MoE operators' installed C and C++ API (shmoe/moe.h, shmoe/moe.hpp) from outside the
    # tree, run by the prefix's shmoerun; each program checks its results against a reference.
    "$osh/oshcc" "${flags[@]}" -std=c11 -O2 -Wall -Wextra -Werror "$here/moe_roundtrip.c" \
      -o moe_roundtrip
    "$osh/oshc++" "${flags[@]}" -std=c++20 -O2 -Wall -Wextra -Werror "$here/moe_layer.cpp" \
      -o moe_layer
    shmoerun=(timeout 120 "$osh/shmoerun" --timeout 60)
    expect_job 2 "${shmoerun[@]}" -n 2 ./moe_roundtrip
    expect_job 3 "${shmoerun[@]}" -n 3 ./moe_roundtrip
    expect_job 2 env SHMEM_SYMMETRIC_SIZE=64M OMP_NUM_THREADS=1 "${shmoerun[@]}" -n 2 ./moe_layer
    ;;

  build_tree)
    # The wrappers generated in the build tree, for use before installing.
    tools=$build/tools/wrappers
    "$tools/oshcc" "${flags[@]}" "$here/ring_put.c" -o ring_put
    expect_job 2 timeout 120 "$tools/oshrun" --timeout 60 -np 2 ./ring_put
    "$tools/oshcc" "${flags[@]}" -static-shmoe "$here/ring_put.c" -o ring_put_static
    expect_static ring_put_static
    expect_job 2 timeout 120 "$tools/oshrun" --timeout 60 -np 2 ./ring_put_static
    ;;

  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: install.$case_name"
