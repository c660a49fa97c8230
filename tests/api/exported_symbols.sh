#!/usr/bin/env bash
# libshmoe.so exports its installed API and nothing else:
#   exported_symbols.sh LIBSHMOE_SO INCLUDE_DIR
# The rule: every symbol `nm -D --defined-only` lists
#   1. is named as the API is: shmem_*, pshmem_*, shmemx_*, pshmemx_*, shmoe_*, or one of the
#      names of before OpenSHMEM 1.4 that shmem.h still declares (start_pes, _my_pe, _num_pes,
#      shmalloc, shfree, shrealloc, shmemalign) and their pshmem.h forms (pstart_pes, p_my_pe, ...);
#   2. is an identifier of the public headers in INCLUDE_DIR (shmem.h, pshmem.h, shmoe/*.h).
# So no C++ symbol is exported (the C++ API, shmoe/moe.hpp, is inline over the C one), and no
# internal C function however it is named (src/libshmoe.map and hidden visibility see to it). Also checks a few API symbols are there, so an empty
# list (a library that exports nothing) fails too.
set -euo pipefail
export LC_ALL=C  # one collation for sort and comm
lib=$1
include=$2
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

[ -f "$lib" ] || fail "no library $lib"
exported=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u)
declared=$(cat "$include"/*.h "$include"/shmoe/*.h | grep -oE '[A-Za-z_][A-Za-z_0-9]*' | sort -u)
deprecated='^p?(start_pes|_my_pe|_num_pes|shmalloc|shfree|shrealloc|shmemalign)$'

not_api=$(grep -vE "^(p?shmem_|p?shmemx_|shmoe_)" <<<"$exported" | grep -vE "$deprecated" || true)
undeclared=$(comm -23 <(echo "$exported") <(echo "$declared"))
if [ -n "$not_api" ] || [ -n "$undeclared" ]; then
  echo "not named as the API:" >&2
  head -40 <<<"$not_api" >&2
  echo "declared by no public header:" >&2
  head -40 <<<"$undeclared" >&2
  fail "$lib exports symbols outside its API (at most 40 of each kind above)"
fi

for sym in shmem_long_put pshmem_long_put shmem_init shmoe_ctx_default shmoe_moe_buffer_create \
  shmoe_moe_dispatch shmoe_mega_moe_run; do
  grep -qxF "$sym" <<<"$exported" || fail "$lib does not export $sym"
done
echo "$(wc -l <<<"$exported") symbols exported, all of the API"
