#!/usr/bin/env bash
# Checks that every tracked C/C++ file is as clang-format writes it (.clang-format, Debian 12's
# clang-format 14: another version formats differently) and names the files that drift; fix
# one with `clang-format -i FILE`. Generated sources are not tracked (they are in build/).
set -euo pipefail
cd "$(dirname "$0")/.."
format=${CLANG_FORMAT:-clang-format}
if ! "$format" --version 2>/dev/null | grep -q 'version 14\.'; then
  echo "format-check: needs clang-format 14 (Debian: apt install clang-format; or set CLANG_FORMAT)"
  exit 2
fi
drift=()
while IFS= read -r -d '' file; do
  "$format" --dry-run -Werror "$file" >/dev/null 2>&1 || drift+=("$file")
done < <(git ls-files -z '*.c' '*.h' '*.cpp' '*.hpp')
if ((${#drift[@]} > 0)); then
  echo "format-check: ${#drift[@]} files are not clang-formatted (clang-format -i FILE):"
  printf '  %s\n' "${drift[@]}"
  exit 1
fi
echo "format-check: every tracked C/C++ file is clang-formatted"
