#!/usr/bin/env bash
# Makes (once) and reuses the project's Python environment, .venv (SHMOE_VENV names another),
# with the versions python/requirements.txt pins, then the client frameworks of tests/clients
# (python/requirements-clients.txt), and prints its interpreter's path. The venv is made by the
# interpreter it is given: PYTHON, else the python3 first on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${SHMOE_VENV:-$root/.venv}
requirements=$root/python/requirements.txt
clients=$root/python/requirements-clients.txt
stamp=$venv/.shmoe-requirements
clients_stamp=$venv/.shmoe-requirements-clients
if [ ! -x "$venv/bin/python" ]; then
  base=${PYTHON:-python3}
  echo "venv.sh: making $venv with $(command -v "$base")" >&2
  "$base" -m venv "$venv" >&2 || {
    echo "venv.sh: '$base -m venv' failed; on Debian: apt-get install python3-venv" >&2
    exit 1
  }
fi
if ! cmp -s "$requirements" "$stamp"; then
  echo "venv.sh: installing python/requirements.txt into $venv" >&2
  "$venv/bin/python" -m pip install -q --upgrade pip >&2
  "$venv/bin/python" -m pip install -q -r "$requirements" >&2
  cp "$requirements" "$stamp"
fi
if ! cmp -s "$clients" "$clients_stamp"; then
  echo "venv.sh: installing python/requirements-clients.txt into $venv" >&2
  "$venv/bin/python" -m pip install -q -r "$requirements" -r "$clients" >&2
  cp "$clients" "$clients_stamp"
fi
echo "$venv/bin/python"
