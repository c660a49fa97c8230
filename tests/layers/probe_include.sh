#!/usr/bin/env bash
# Compiles a one-line probe per header with a layer's include path (DIRS: its folders,
# ':'-separated). A +header (its own layer or one below) must compile: the positive control,
# without which a failing probe proves nothing. A -header (a layer above or beside) must fail
# for not being found, not for another reason.
#   probe_include.sh CXX DIRS +allowed/x.hpp... -forbidden/y.hpp...
set -euo pipefail
cxx=$1
IFS=: read -ra dirs <<<"$2"
shift 2
flags=(-std=c++20 -fsyntax-only)
for d in "${dirs[@]}"; do flags+=("-I$d"); done
# A folder of its own: a quoted include looks beside the probe first.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

probe() {
  printf '#include "%s"\n' "$1" >"$work/probe.cpp"
  "$cxx" "${flags[@]}" "$work/probe.cpp" 2>&1
}

# fail MESSAGE [COMPILER_OUTPUT]
fail() {
  echo "FAIL: $1"
  if (($# > 1)); then echo "$2"; fi
  exit 1
}

controls=0
for arg in "$@"; do
  header=${arg:1}
  case $arg in
    +*)
      out=$(probe "$header") || fail "allowed $header does not compile:" "$out"
      controls=$((controls + 1))
      echo "ok: $header compiles" ;;
    -*)
      if out=$(probe "$header"); then fail "$header (upward) compiles"; fi
      # GCC says "x.hpp: No such file or directory", clang "'x.hpp' file not found".
      grep -Eq "$header(: No such file|' file not found)" <<<"$out" ||
        fail "$header fails, but not as not found:" "$out"
      echo "ok: $header: not found" ;;
    *) echo "usage: probe_include.sh CXX DIRS +allowed... -forbidden..."; exit 2 ;;
  esac
done
((controls > 0)) || fail "no allowed header to control the probes"
