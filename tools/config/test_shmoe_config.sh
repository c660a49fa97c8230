#!/bin/sh
# shmoe-config's tests, run from the build tree:
#   test_shmoe_config.sh CASE PATH/TO/shmoe-config PATH/TO/shmoe_segment_probe
set -u
case_name=$1
tool=$2
probe=${3:-}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "--- output:" >&2
  cat "$out" >&2
  exit 1
}

# --diagnose must print one JSON document, and exit 0 (healthy) or 1 (problems found), never
# crash; the exit status must agree with "healthy" and with next_steps being empty.
diagnose() {
  "$tool" --diagnose "$@" >"$out"
  status=$?
  [ "$status" -eq 0 ] || [ "$status" -eq 1 ] || fail "--diagnose exited $status"
  python3 - "$out" "$status" <<'PY' || fail "--diagnose printed bad JSON or inconsistent fields"
import json, sys
doc = json.load(open(sys.argv[1]))
status = int(sys.argv[2])
for key in ("version", "install_root", "files", "loader_path", "shared_memory", "open_files",
            "ucx", "healthy", "next_steps"):
    assert key in doc, f"missing key {key}"
assert doc["healthy"] == (status == 0), "exit status disagrees with 'healthy'"
assert doc["healthy"] == (not doc["next_steps"]), "'healthy' disagrees with next_steps"
assert isinstance(doc["files"]["complete"], bool)
PY
}

case $case_name in
  flags)
    "$tool" --cflags >"$out" || fail "--cflags exited $?"
    grep -q '^-I/.*include$' "$out" || fail "--cflags printed no -I<dir>/include"
    [ -f "$(sed 's/^-I//' "$out")/shmem.h" ] || fail "--cflags names a directory without shmem.h"
    "$tool" --libs >"$out" || fail "--libs exited $?"
    grep -q '^-L/.* -lshmoe -Wl,-rpath,/' "$out" || fail "--libs printed no -L... -lshmoe -Wl,-rpath,..."
    "$tool" --version >"$out" || fail "--version exited $?"
    grep -Eq '^[0-9]+\.[0-9]+\.[0-9]+$' "$out" || fail "--version printed no version"
    # The build tree is not an installation, and --prefix must say so rather than print a path.
    if "$tool" --prefix >"$out" 2>&1; then fail "--prefix succeeded in the build tree"; fi
    grep -q 'build tree' "$out" || fail "--prefix did not say it runs from the build tree"
    ;;
  diagnose_parses)
    diagnose --pes 2
    # The system libraries, each found where this process loaded it, and the library loads.
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["system_libraries"]; \
      assert d["libshmoe_loads"] is True, d; \
      names = [k for k in d if k.startswith("lib") and k != "libshmoe_loads"]; \
      assert sorted(names) == sorted(["libucp.so.0", "libpmix.so.2", "libdnnl.so.2", \
        "libcrypto.so.3", "libfmt.so.9", "libgomp.so.1"]), names; \
      assert all(d[k]["path"] and d[k]["path"].startswith("/") for k in names), d' "$out" \
      || fail "system_libraries lists no loaded path for some library"
    ;;
  broken_library)
    # An installed layout whose libshmoe.so cannot load: the next step says why.
    prefix=$(mktemp -d)
    mkdir -p "$prefix/bin" "$prefix/lib" "$prefix/include/shmoe"
    cp "$tool" "$prefix/bin/shmoe-config"
    echo "not an ELF file" >"$prefix/lib/libshmoe.so"
    tool="$prefix/bin/shmoe-config" diagnose --pes 1
    rm -rf "$prefix"
    [ "$status" -eq 1 ] || fail "a libshmoe.so that cannot load was not reported"
    grep -q 'libshmoe.so does not load: .*libshmoe.so' "$out" || fail "no next step naming the load error"
    ;;
  too_large_heap)
    SHMEM_SYMMETRIC_SIZE=100T diagnose --pes 4
    [ "$status" -eq 1 ] || fail "SHMEM_SYMMETRIC_SIZE=100T was not reported as a problem"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); \
      assert d["shared_memory"]["ok"] is False; \
      assert any("SHMEM_SYMMETRIC_SIZE" in s for s in d["next_steps"])' "$out" \
      || fail "no next step about SHMEM_SYMMETRIC_SIZE"
    ;;
  bad_heap_size)
    SHMEM_SYMMETRIC_SIZE=lots diagnose --pes 1
    [ "$status" -eq 1 ] || fail "SHMEM_SYMMETRIC_SIZE=lots was not reported as a problem"
    grep -q "SHMEM_SYMMETRIC_SIZE='lots' is not a size" "$out" || fail "no parse error for 'lots'"
    ;;
  env_lists_settings)
    SHMOE_WAIT_SPIN=7 "$tool" --env >"$out" || fail "--env exited $? with valid settings"
    grep -A1 '^SHMOE_WAIT_SPIN$' "$out" | grep -q 'in force: 7 (from the environment)' \
      || fail "--env does not show SHMOE_WAIT_SPIN=7 in force"
    grep -A2 '^SHMEM_SYMMETRIC_SIZE$' "$out" | grep -q 'default:  512M' \
      || fail "--env does not show SHMEM_SYMMETRIC_SIZE's default"
    if SHMOE_WAIT_SPIN=lots "$tool" --env >"$out"; then fail "--env accepted SHMOE_WAIT_SPIN=lots"; fi
    grep -q "SHMOE_WAIT_SPIN='lots' is not an integer (allowed range 0..1073741824)" "$out" \
      || fail "--env did not name the bad value and the allowed range"
    # A choice that shmem_init would refuse is refused here too, with every accepted value; the
    # listing shows a choice's values.
    if SHMOE_TRANSPORT=bogus "$tool" --env >"$out"; then fail "--env accepted SHMOE_TRANSPORT=bogus"; fi
    grep -q "SHMOE_TRANSPORT=bogus is not one of the accepted values: auto, shm, ucx" "$out" \
      || fail "--env did not name the accepted transports"
    SHMOE_BARRIER=central "$tool" --env >"$out" || fail "--env refused SHMOE_BARRIER=central"
    grep -A3 '^SHMOE_BARRIER$' "$out" | grep -q 'kind:     choice of dissemination, central' \
      || fail "--env does not list SHMOE_BARRIER's values"
    ;;
  env_unknown)
    # A misspelt variable is named with the setting meant, and fails the listing, as a bad value
    # does; SHMOE_WARN_UNKNOWN_ENV=0 silences it; the launcher's own variables are known.
    if SHMOE_TRANSPRT=ucx "$tool" --env >"$out"; then fail "--env accepted SHMOE_TRANSPRT"; fi
    grep -q '^unknown: SHMOE_TRANSPRT is not a shmoe setting and is ignored; did you mean SHMOE_TRANSPORT?' "$out" \
      || fail "--env did not name SHMOE_TRANSPRT with SHMOE_TRANSPORT"
    SHMOE_TRANSPRT=ucx SHMOE_WARN_UNKNOWN_ENV=0 "$tool" --env >"$out" \
      || fail "--env refused SHMOE_TRANSPRT under SHMOE_WARN_UNKNOWN_ENV=0"
    if grep -q '^unknown:' "$out"; then fail "SHMOE_WARN_UNKNOWN_ENV=0 did not silence it"; fi
    SHMOE_RANK=0 SHMOE_SIZE=1 SHMOE_STORE=127.0.0.1:1 SHMOE_MOE_PE=1 "$tool" --env >"$out" \
      || fail "--env refused the launcher's variables"
    ;;
  segment_matches_pe)
    # What --diagnose plans /dev/shm for must be what a PE maps, the runtime's own state included.
    SHMEM_SYMMETRIC_SIZE=5M diagnose --pes 1
    planned=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["shared_memory"]["segment_bytes_per_pe"])' "$out")
    SHMEM_SYMMETRIC_SIZE=5M "$probe" >"$out" 2>&1 || fail "the probe PE failed"
    mapped=$(cat "$out")
    [ "$planned" = "$mapped" ] || fail "--diagnose plans $planned bytes per PE, a PE maps $mapped"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: $case_name"
