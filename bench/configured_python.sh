#!/usr/bin/env bash
# configured_python.sh BUILD_DIR: the interpreter the build's Python package is for (its
# CMakeCache's Python3_EXECUTABLE), for the benchmarks and their plots; PYTHON overrides it,
# and python3 stands in for a build without one.
set -euo pipefail
if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; exit 0; fi
configured=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' "${1:?usage: $0 BUILD_DIR}/CMakeCache.txt" 2>/dev/null || true)
echo "${configured:-python3}"
