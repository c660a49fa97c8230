#!/usr/bin/env bash
# The test command: installs what the build needs, builds with warnings as errors, runs every
# test (unit tests, multi-PE tests as real processes at 1, 2, 4 and 8 PEs, failure handling).
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
