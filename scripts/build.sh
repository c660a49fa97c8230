#!/usr/bin/env bash
# Configures and builds shmoe into build/ (warnings are errors), the Python package for the
# project's venv (scripts/venv.sh makes it once). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(scripts/venv.sh)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMOE_WERROR=ON \
  -DPython3_EXECUTABLE="$python" "$@" >/dev/null
cmake --build build -j "$(nproc)"
