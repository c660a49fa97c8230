#!/usr/bin/env bash
# torchrun_nodes.sh PYTHON NODES PER_NODE PROGRAM: starts PROGRAM as torchrun does on NODES
# "nodes" of this machine, one torchrun each (--nnodes, --node_rank, a c10d rendezvous on
# loopback), PER_NODE ranks each; deep_ep makes each node a simulated host. Passes when every
# torchrun exits 0 and every rank printed its line.
set -euo pipefail
python=$1 nodes=$2 per_node=$3 program=$4
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT
pids=()
for ((node = 0; node < nodes; node++)); do
  "$python" -m torch.distributed.run --nnodes "$nodes" --node_rank "$node" \
    --nproc_per_node "$per_node" --master_addr 127.0.0.1 --master_port "$port" \
    "$program" >"$out/node$node.log" 2>&1 &
  pids+=($!)
done
status=0
for ((node = 0; node < nodes; node++)); do
  wait "${pids[$node]}" || { status=$?; echo "torchrun of node $node exited with status $status"; }
  sed "s/^/[node $node] /" "$out/node$node.log"
done
ranks=$((nodes * per_node))
got=$(cat "$out"/node*.log | grep -c "^rank [0-9]*/$ranks: " || true)
[ "$got" -eq "$ranks" ] || { echo "FAIL: $got of $ranks ranks reported"; exit 1; }
exit $status
