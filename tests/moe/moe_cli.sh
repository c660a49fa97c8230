#!/usr/bin/env bash
# shmoe-moe's dispatch/combine command line: a shape larger than the machine's memory is refused
# at once (no PE starts, nothing is allocated) with what it needs, what the machine has and the
# largest --bs that fits; an --output-dir that cannot be written is refused naming it. Every
# refusal exits non-zero, never by a signal.
#   moe_cli.sh SHMOE_MOE
set -uo pipefail
moe=${1:?usage: moe_cli.sh SHMOE_MOE}
failures=0

# expect_refusal "what" "expected message part" command...
expect_refusal() {
  local what=$1 expected=$2
  shift 2
  local out status start=$SECONDS
  out=$("$@" 2>&1)
  status=$?
  if ((status == 0 || status >= 128)) || ! grep -qF -- "$expected" <<<"$out"; then
    echo "FAIL: $what: status $status, expected a refusal with '$expected', got:"
    echo "$out" | head -20
    failures=$((failures + 1))
  elif ((SECONDS - start > 10)); then
    echo "FAIL: $what: the refusal took $((SECONDS - start)) s"
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}

huge=(dispatch --pes 2 --bs 1048576 --hidden 4096 --topk 8 --experts-per-pe 4 --dtype float32)
expect_refusal "a shape beyond the machine's memory" \
  "shmoe-moe: dispatch --pes 2 --bs 1048576 --hidden 4096 --topk 8 --experts-per-pe 4 --dtype float32 does not fit in this machine's memory: " \
  "$moe" "${huge[@]}"
expect_refusal "what the machine has is said" "available (MemAvailable)" "$moe" "${huge[@]}"
expect_refusal "what fits is said" "the largest --bs that fits is " "$moe" "${huge[@]}"
# With the user's heap, only the memory is checked here (shmem_init checks /dev/shm).
expect_refusal "with SHMEM_SYMMETRIC_SIZE set" "does not fit in this machine's memory" \
  env SHMEM_SYMMETRIC_SIZE=64M "$moe" "${huge[@]}"
expect_refusal "one case of a sweep" "--bs 1048576 --hidden 4096" \
  "$moe" dispatch --pes 2 --bs 8,1048576 --hidden 4096 --topk 8 --experts-per-pe 4 --dtype float32

# The largest --bs it names lies between 0 and the --bs asked for.
bs=$("$moe" "${huge[@]}" 2>&1 | grep -oE "the largest --bs that fits is [0-9]+" | grep -oE "[0-9]+$")
if [[ -n $bs ]] && ((bs > 0 && bs < 1048576)); then
  echo "ok: the largest --bs is $bs"
else
  echo "FAIL: no largest --bs in the refusal"
  failures=$((failures + 1))
fi

expect_refusal "unwritable --output-dir" \
  "shmoe-moe: --output-dir=/proc/nonexistent: cannot create the directory: " \
  "$moe" dispatch --pes 2 --bs 8 --hidden 16 --perf --output-dir /proc/nonexistent
expect_refusal "--output-dir naming a file" "--output-dir=/etc/hostname: cannot create the directory" \
  "$moe" dispatch --pes 2 --bs 8 --hidden 16 --perf --output-dir /etc/hostname
expect_refusal "received rows beyond any call" "--max-recv-rows: Value 274877906945 not in range" \
  "$moe" dispatch --pes 2 --bs 8 --hidden 16 --max-recv-rows 274877906945

# Every float option refuses NaN and infinity (a NaN zipf exponent once looped forever), on both
# command lines; a seed is a non-negative integer (-1 once wrapped to 2^64-1).
for cmd in dispatch mega; do
  for opt in "--zipf-s nan" "--zipf-s inf" "--drop nan" "--drop -inf" "--timeout nan" "--timeout inf"; do
    expect_refusal "$cmd $opt" "${opt%% *}: Value ${opt#* } not a finite number in range" \
      "$moe" $cmd --pes 2 --routing zipf $opt
  done
  expect_refusal "$cmd --seed -1" "--seed: Value -1 is not an integer in range [0 - 18446744073709551615]" \
    "$moe" $cmd --pes 2 --seed -1
done

# No tokens anywhere is a legitimate step: every operator runs and verifies it.
for op in dispatch combine pipeline dispatch-doubleplane combine-doubleplane; do
  out=$("$moe" $op --pes 2 --bs 0 --hidden 16 --topk 2 --experts-per-pe 2 --timeout 60 2>&1)
  if (($? == 0)) && (($(grep -c "verify=pass" <<<"$out") == 2)) && grep -q "bs=0" <<<"$out"; then
    echo "ok: $op --bs 0"
  else
    echo "FAIL: $op --bs 0: $out" | head -5
    failures=$((failures + 1))
  fi
done

# A passing combine says it is within its tolerance, with the bound, not a ratio near 1; the PEs'
# lines come in PE order, then the case's summary.
out=$("$moe" combine --pes 3 --bs 4 --hidden 64 --topk 2 --experts-per-pe 2 --timeout 60 2>&1)
if (($? == 0)) && (($(grep -c "verify=pass.* combine within tolerance (|err| <= 0.5 + fp32 accumulation)" <<<"$out") == 3)) &&
  ! grep -q "combine_err/tol" <<<"$out"; then
  echo "ok: combine within tolerance"
else
  echo "FAIL: combine's passing line: $out" | head -5
  failures=$((failures + 1))
fi
if [[ $(grep -o "^PE [0-9]*: combine" <<<"$out" | tr '\n' ' ') == "PE 0: combine PE 1: combine PE 2: combine " ]] &&
  [[ $(tail -n 1 <<<"$out") == "combine bs=4 h=64 topk=2 experts_per_pe=2 dtype=int32: all 3 PEs passed verification" ]]; then
  echo "ok: PE lines in order, then the summary"
else
  echo "FAIL: PE lines out of order or no summary: $out" | head -8
  failures=$((failures + 1))
fi

# --version, and every option's default in --help (of the main command and of mega).
if [[ $("$moe" --version) =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "ok: --version"
else
  echo "FAIL: --version printed '$("$moe" --version 2>&1)'"
  failures=$((failures + 1))
fi
for sub in "" mega; do
  help=$("$moe" $sub --help 2>&1)
  if grep -Eq -- '--pes INT:INT in \[1 - 64\]=[0-9]+' <<<"$help" &&
    grep -Eq -- '--warmup INT:INT in \[0 - 1000000\]=[0-9]+' <<<"$help"; then
    echo "ok: defaults in '$sub --help'"
  else
    echo "FAIL: '$sub --help' shows no defaults: $help" | head -20
    failures=$((failures + 1))
  fi
done

# With --perf, more PEs than cores is pointed out: the timings then include waiting for a core.
pes=$(($(nproc) + 1))
tmp_out=$(mktemp -d)
out=$("$moe" dispatch --pes $pes --bs 4 --hidden 16 --perf --warmup 0 --loops 1 --output-dir "$tmp_out" --timeout 60 2>&1)
rm -rf "$tmp_out"
if grep -q "^shmoe-moe: note: $pes PEs on $(nproc) core" <<<"$out"; then
  echo "ok: PEs beyond the cores noted"
else
  echo "FAIL: no note for $pes PEs on $(nproc) cores: $out" | head -5
  failures=$((failures + 1))
fi

# A writable --output-dir gets its CSV.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$("$moe" dispatch --pes 2 --bs 8 --hidden 16 --perf --warmup 0 --loops 1 --output-dir "$dir/a/b" --timeout 60 2>&1)
if [[ -f $dir/a/b/dispatch_pes2_bs8_h16_topk2_epp2_int32.csv ]] && ! ls -A "$dir/a/b" | grep -q shmoe-write-test; then
  echo "ok: csv written"
else
  echo "FAIL: csv not written to $dir/a/b ($out)"
  ls -la "$dir/a/b"
  failures=$((failures + 1))
fi
# A second run at the same shape appends: one header, each run's rows under its own id and time.
"$moe" dispatch --pes 2 --bs 8 --hidden 16 --perf --warmup 0 --loops 1 --output-dir "$dir/a/b" --timeout 60 >/dev/null 2>&1
csv=$dir/a/b/dispatch_pes2_bs8_h16_topk2_epp2_int32.csv
if python3 - "$csv" "$dir/a/b/dispatch_waits_pes2_bs8_h16_topk2_epp2_int32.csv" <<'PY'; then
import csv, sys
for path, rows_per_run in ((sys.argv[1], 2), (sys.argv[2], 4)):
    rows = list(csv.reader(open(path)))
    assert rows[0][:2] == ["run_id", "time"], rows[0]
    assert all(r != rows[0] for r in rows[1:]), "the header is repeated"
    ids = [r[0] for r in rows[1:]]
    assert len(set(ids)) == 2 and all(ids.count(i) == rows_per_run for i in ids), ids
    assert all(r[1].endswith("Z") and "T" in r[1] for r in rows[1:]), rows
PY
  echo "ok: csv rows appended per run"
else
  echo "FAIL: the second run did not append its rows to $csv"
  cat "$csv"
  failures=$((failures + 1))
fi
# A CSV of other columns (an older version's, say) is refused, not mixed with.
echo "RunId,Time,DataSize/B,PEs" >"$dir/a/b/dispatch_pes2_bs4_h16_topk2_epp2_int32.csv"
out=$("$moe" dispatch --pes 2 --bs 4 --hidden 16 --perf --warmup 0 --loops 1 --output-dir "$dir/a/b" --timeout 60 2>&1)
if (($? != 0)) && grep -q "dispatch_pes2_bs4_h16_topk2_epp2_int32.csv holds rows of other columns" <<<"$out"; then
  echo "ok: csv of other columns refused"
else
  echo "FAIL: a CSV of other columns was not refused: $out" | head -5
  failures=$((failures + 1))
fi
((failures == 0))
