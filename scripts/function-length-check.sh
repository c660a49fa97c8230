#!/usr/bin/env bash
# Checks that no function in src/, tools/ or python/src/ is longer than 80 lines (lizard's count,
# from the signature to the closing brace), and names each one that is, as lizard's warning
# lines. Split a longer function into named steps, or a call object with a method per phase (as
# src/moe/dispatch.cpp's DispatchCall). A function that reads better long (a flat table) says why
# in a comment above it and has the line `// #lizard forgives(length)` in its body (a comment of
# its own: lizard reads it only there). Only the length is checked; complexity, tokens and
# parameters are left to review. Runs lizard from the project's venv (scripts/venv.sh;
# python/requirements.txt pins it).
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(scripts/venv.sh)
if ! warnings=$("$python" -m lizard --length 80 --CCN 1000000 --arguments 1000000 --warnings_only \
  src tools python/src); then
  echo "function-length-check: functions longer than 80 lines (split them, or say why above the"
  echo "function and put a line '// #lizard forgives(length)' in its body):"
  printf '%s\n' "$warnings"
  exit 1
fi
echo "function-length-check: no function in src, tools or python/src is over 80 lines"
