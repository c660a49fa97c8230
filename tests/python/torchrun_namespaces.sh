#!/usr/bin/env bash
# torchrun_namespaces.sh PYTHON PER_NODE PROGRAM: deep_ep across two real "hosts": two network
# namespaces joined by a veth pair (tests/netns/netns_lib.sh), each with a host name of its own
# (a UTS namespace), one torchrun in each (--nnodes 2, the rendezvous at 10.77.0.1), PER_NODE
# ranks each. The Buffer must see a group that spans hosts: rank 0 runs the config store on
# every interface and names the address the other namespace reaches (10.77.0.1); shmoe's PEs
# share memory inside a namespace and use UCX over TCP on the veth link between them. Passes
# when both torchruns exit 0 and every rank printed its line; exits 77 ("SKIPPED: reason")
# where namespaces cannot be made.
set -uo pipefail
python=$1 per_node=$2 program=$3
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/../netns/netns_lib.sh
source "$here/../netns/netns_lib.sh"
netns_setup
command -v unshare >/dev/null || netns_skip "unshare (util-linux) is not installed"
for var in $(compgen -e); do
  if [[ $var == SHMOE_* ]]; then unset "$var"; fi
done
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; netns_cleanup; rm -rf "$out"' EXIT
pids=()
for node in 0 1; do
  ns=$ns_a
  ((node == 1)) && ns=$ns_b
  # shellcheck disable=SC2016 # expanded by the inner shell
  ip netns exec "$ns" unshare --uts bash -c 'hostname "$0" && exec "$@"' "shmoe-host-$node" \
    env GLOO_SOCKET_IFNAME="$dev" UCX_TLS=tcp,self UCX_NET_DEVICES="$dev" OMP_NUM_THREADS=1 \
    timeout -k 5 180 "$python" -m torch.distributed.run --nnodes 2 --node_rank "$node" \
    --nproc_per_node "$per_node" --master_addr 10.77.0.1 --master_port 29531 "$program" \
    >"$out/node$node.log" 2>&1 &
  pids+=($!)
done
status=0
for node in 0 1; do
  wait "${pids[$node]}" || { status=$?; echo "torchrun of node $node exited with status $status"; }
  sed "s/^/[node $node] /" "$out/node$node.log"
done
ranks=$((2 * per_node))
got=$(cat "$out"/node*.log | grep -c "^rank [0-9]*/$ranks: " || true)
[ "$got" -eq "$ranks" ] || { echo "FAIL: $got of $ranks ranks reported"; exit 1; }
exit $status
