#!/usr/bin/env bash
# shmoe-moe --perf --plot: a tiny perf run draws its CSV into a PNG of the same name next to it,
# from the build tree and from an installed layout (bin/shmoe-moe, share/shmoe/plot_csv.py, as
# `cmake --install` and the pip wheel lay them out); with a Python that lacks matplotlib, one
# line says so, the CSV is still written and the status is 3; --plot without --perf is refused.
#   plot_cli.sh SHMOE_MOE PYTHON   (PYTHON: --plot-python's default, the build's interpreter)
set -uo pipefail
moe=${1:?usage: plot_cli.sh SHMOE_MOE PYTHON} python=${2:-python3}
if ! "$python" -c "import matplotlib" 2>/dev/null; then
  echo "SKIPPED: $python (the build's Python, --plot-python's default) has no matplotlib"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
base=(pipeline --pes 2 --bs 8 --hidden 16 --topk 2 --experts-per-pe 2 --dtype int32 --timeout 120)
shape=("${base[@]}" --perf --warmup 1 --loops 3)
stem=pipeline_pes2_bs8_h16_topk2_epp2_int32

# check_png "what" PNG: exists, starts with the PNG signature, and holds a drawing (a blank
# 3-panel figure is already ~20 kB; an empty or truncated file is not).
check_png() {
  local what=$1 png=$2 size
  if [[ ! -f $png ]]; then
    fail "$what: no $png"
    return
  fi
  if [[ $(head -c 8 "$png" | od -An -tx1 | tr -d ' \n') != 89504e470d0a1a0a ]]; then
    fail "$what: $png does not start with the PNG signature"
    return
  fi
  size=$(stat -c %s "$png")
  if ((size < 10000)); then
    fail "$what: $png is only $size bytes"
    return
  fi
  echo "ok: $what: $png ($size bytes)"
}

# From the build tree, with the default interpreter.
out=$("$moe" "${shape[@]}" --output-dir "$tmp/build" --plot 2>&1)
status=$?
echo "$out" | grep -E "^(plot:|shmoe-moe: --plot)" || true
if ((status != 0)); then
  echo "$out"
  fail "build tree: status $status"
fi
grep -qxF "plot: $tmp/build/$stem.png" <<<"$out" || fail "build tree: no 'plot: PATH' line"
check_png "build tree" "$tmp/build/$stem.png"

# An installed layout, elsewhere: the program finds share/shmoe/plot_csv.py from its bin/.
mkdir -p "$tmp/prefix/bin" "$tmp/prefix/share/shmoe"
cp "$moe" "$tmp/prefix/bin/"
cp "$(dirname "$moe")/plot_csv.py" "$tmp/prefix/share/shmoe/"
out=$("$tmp/prefix/bin/shmoe-moe" "${shape[@]}" --output-dir "$tmp/installed" --plot 2>&1)
status=$?
if ((status != 0)); then
  echo "$out"
  fail "installed layout: status $status"
fi
check_png "installed layout" "$tmp/installed/$stem.png"

# A Python without matplotlib (the build's, without its site-packages).
cat >"$tmp/python-bare" <<EOS
#!/bin/sh
exec "$python" -S "\$@"
EOS
chmod +x "$tmp/python-bare"
out=$("$moe" "${shape[@]}" --output-dir "$tmp/bare" --plot --plot-python "$tmp/python-bare" 2>&1)
status=$?
lines=$(grep -c "matplotlib" <<<"$out")
if ((status != 3)); then
  fail "no matplotlib: status $status, expected 3"
elif [[ $lines -ne 1 ]] ||
  ! grep -qE "^shmoe-moe: --plot: matplotlib is not installed for .*: install it \(pip install matplotlib\) or name a Python that has it with --plot-python; the CSVs are written, no PNG was drawn$" <<<"$out"; then
  echo "$out"
  fail "no matplotlib: not the one line that says so"
elif [[ ! -s $tmp/bare/$stem.csv || -e $tmp/bare/$stem.png ]]; then
  ls -l "$tmp/bare"
  fail "no matplotlib: the CSV is not there, or a PNG is"
else
  echo "ok: no matplotlib: $(grep matplotlib <<<"$out")"
fi

out=$("$moe" "${base[@]}" --plot 2>&1)
status=$?
if ((status != 2)) || ! grep -qF "shmoe-moe: --plot draws the CSVs --perf writes: give --perf too" <<<"$out"; then
  echo "$out"
  fail "--plot without --perf: status $status, not refused"
else
  echo "ok: --plot without --perf refused"
fi

((failures == 0)) || exit 1
echo "ok: --plot"
