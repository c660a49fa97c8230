#!/usr/bin/env bash
# A stranger floods the config store while a job starts: another user (nobody, when this runs
# as root; this user otherwise) holds as many connections to the store as its descriptors
# allow, never proving the key, and reopens each one the store closes. A job of two launchers
# (`shmoerun --size 2` twice, the second joining the first's store with --store) must start and
# finish all the same, and the first launcher must name the flood as one.
#   store_flood.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: store_flood.sh BUILD_DIR}
shmoerun=$build/tools/shmoerun/shmoerun
victim=$build/tests/security/security_victim
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
chmod 755 "$out"
trap 'kill "${flooder:-0}" 2>/dev/null; rm -rf "$out"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

as_other=()
who="this user"
if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null &&
  setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups -- /usr/bin/python3 -c 'pass' 2>/dev/null; then
  as_other=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --)
  who="user nobody"
fi
cp "$here/flooder.py" "$out/flooder.py"
chmod 644 "$out/flooder.py"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
SHMOE_JOB_KEY=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export SHMOE_JOB_KEY SHMEM_SYMMETRIC_SIZE=16M SHMOE_HANG_TIMEOUT=30 SHMOE_INIT_TIMEOUT=30

# The first launcher runs the store, with the common default of 1024 descriptors (so that the
# flood could fill its table); its PE waits in shmem_init for the second launcher's.
touch "$out/go"  # the victim program's PEs go on at once
(ulimit -n 1024 && exec "$shmoerun" -n 1 --size 2 --port "$port" --timeout 90 "$victim" "$out") >"$out/a.log" 2>&1 &
a=$!
for _ in $(seq 100); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), timeout=1)" 2>/dev/null && break
  sleep 0.05
done
echo "flooding the store at 127.0.0.1:$port as $who"
"${as_other[@]}" /usr/bin/python3 "$out/flooder.py" 127.0.0.1 "$port" 10 >"$out/flooder.log" 2>&1 &
flooder=$!
sleep 3  # the flood is at its height: every descriptor the flooder can get is a connection
start=$SECONDS
"$shmoerun" -n 1 --size 2 --first-rank 1 --store "127.0.0.1:$port" --timeout 90 "$victim" "$out" >"$out/b.log" 2>&1
rc_b=$?
wait $a
rc_a=$?
took=$((SECONDS - start))
wait $flooder
echo "first launcher ($rc_a):"; sed 's/^/  /' "$out/a.log" | head -20
echo "second launcher ($rc_b):"; sed 's/^/  /' "$out/b.log" | head -10
cat "$out/flooder.log"
[[ $rc_a == 0 && $rc_b == 0 ]] || fail "the job did not finish under the flood (exit codes $rc_a, $rc_b)"
((took < 60)) || fail "the job took $took s under the flood"
grep -q "a flood of connections that do not prove the job key" "$out/a.log" ||
  fail "the store did not name the flood"
held=$(grep -oE "held at most [0-9]+" "$out/flooder.log" | grep -oE "[0-9]+$")
[[ -n $held && $held -ge 200 ]] || fail "the flooder held only ${held:-no} connections: no flood to speak of"
if ((failures == 0)); then echo "ok: a job of two launchers started and finished while $who flooded its store"; fi
exit $((failures > 0))
