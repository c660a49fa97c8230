#!/usr/bin/env bash
# The test command: installs what the build needs (Debian's packages, and the project's venv with
# torch and the other Python packages from PyPI: scripts/venv.sh), builds with warnings as
# errors, runs every test (unit tests, multi-PE tests as real processes at 1, 2, 4 and 8 PEs,
# failure handling, the Python package and deep_ep under every launcher).
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
