#!/usr/bin/env bash
# expect_ranks.sh N COMMAND...: runs COMMAND (a launcher starting N ranks of a deep_ep example),
# shows its output, and passes when it exits 0 and each of the N ranks printed its
# "rank r/N: " line (printed only after the rank's checks passed).
set -uo pipefail
n=$1
shift
out=$("$@" 2>&1)
status=$?
echo "$out"
[ $status -eq 0 ] || { echo "FAIL: exited with status $status"; exit 1; }
for ((r = 0; r < n; r++)); do
  grep -q "^rank $r/$n: " <<<"$out" || { echo "FAIL: rank $r/$n printed no result"; exit 1; }
done
