#!/usr/bin/env bash
# Installs the Debian 12 packages shmoe builds and tests with (root, or sudo). Does nothing when
# they are all present already. The Python packages come from PyPI (scripts/venv.sh).
set -euo pipefail
packages=(
  cmake ninja-build g++ pkg-config python3
  libfmt-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev  # the unit and PE tests link GTest::gtest_main only (no gmock)
  libdnnl-dev  # oneDNN: the MegaMoE GEMMs (src/moe/mega_gemm.cpp)
  libucx-dev iproute2
  libpmix-dev openmpi-bin  # PMIx bootstrap (src/bootstrap/pmix_launch.cpp), tested under mpirun
  libopenmpi-dev  # MPI_Alltoallv, the peer bench/moe_mpi_bench measures shmoe against
  libssl-dev  # libcrypto's HMAC-SHA256 for the config store's job key (src/bootstrap/store_auth.cpp)
  util-linux  # setpriv: tests/security runs a stranger as user nobody
  clang libclang-rt-14-dev  # the libFuzzer targets (tests/fuzz) and their sanitizer runtimes
  clang-format  # 14: scripts/format-check.sh, a stage of .ci/run
  # The Python package (python/): the interpreter's headers and venv. Its tests run in the
  # project's venv (scripts/venv.sh: torch, numpy 2, pytest, mypy, matplotlib from PyPI), and
  # once more under Debian's python3 with its numpy 1.x (tests/python: python.numpy1).
  python3-dev python3-venv python3-numpy python3-pytest
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "installing: ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
