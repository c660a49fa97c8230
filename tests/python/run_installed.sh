#!/usr/bin/env bash
# The package as `cmake --install` put it: run_installed.sh PREFIX PYTHON_DIR PYTHON PROGRAM
# runs PROGRAM on 2 PEs with the prefix's shmoerun and PYTHONPATH=PREFIX/PYTHON_DIR only, and
# checks that shmoe was imported from the prefix.
set -euo pipefail
prefix=$1 python_dir=$2 python=$3 program=$4
case $python_dir in /*) ;; *) python_dir=$prefix/$python_dir ;; esac
[ -f "$python_dir/shmoe/__init__.py" ] || { echo "FAIL: no $python_dir/shmoe/__init__.py"; exit 1; }
ls "$python_dir"/shmoe/_shmoe*.so >/dev/null || { echo "FAIL: no extension module in $python_dir/shmoe"; exit 1; }
where=$(env -i PATH=/usr/bin:/bin PYTHONPATH="$python_dir" PYTHONDONTWRITEBYTECODE=1 "$python" -c 'import shmoe; print(shmoe.__file__)')
[ "$where" = "$python_dir/shmoe/__init__.py" ] || { echo "FAIL: shmoe came from $where"; exit 1; }
env -i PATH=/usr/bin:/bin PYTHONPATH="$python_dir" PYTHONDONTWRITEBYTECODE=1 \
  "$prefix/bin/shmoerun" -n 2 --timeout 60 "$python" "$program"
