# Sourced by tests/netns/run.sh and bench/ucx_veth.sh: two network namespaces joined by a veth
# pair, 10.77.0.1/24 in $ns_a and 10.77.0.2/24 in $ns_b, both ends named $dev inside their
# namespace; removed when the sourcing script exits. Where that cannot be done (not root, no
# iproute2, no namespace support) it prints "SKIPPED: <reason>" and exits 77.
netns_skip() {
  echo "SKIPPED: $*"
  exit 77
}

netns_cleanup() {
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null # deleting a namespace deletes its end of the veth pair
}

netns_setup() {
  [[ $(id -u) == 0 ]] || netns_skip "network namespaces need root (running as uid $(id -u))"
  command -v ip >/dev/null || netns_skip "the ip command (iproute2) is not installed"
  ns_a=shmoe-a-$$
  ns_b=shmoe-b-$$
  dev=shmoeveth
  trap netns_cleanup EXIT
  local err
  err=$(ip netns add "$ns_a" 2>&1) || netns_skip "cannot create a network namespace: $err"
  err=$(ip netns add "$ns_b" 2>&1) || netns_skip "cannot create a network namespace: $err"
  err=$(ip link add "sva$$" type veth peer name "svb$$" 2>&1) ||
    netns_skip "cannot create a veth pair: $err"
  # Both ends get one name inside their namespaces, so UCX_NET_DEVICES is the same for all.
  ip link set "sva$$" netns "$ns_a" &&
    ip link set "svb$$" netns "$ns_b" &&
    ip -n "$ns_a" link set "sva$$" name $dev &&
    ip -n "$ns_b" link set "svb$$" name $dev &&
    ip -n "$ns_a" addr add 10.77.0.1/24 dev $dev &&
    ip -n "$ns_b" addr add 10.77.0.2/24 dev $dev &&
    ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
    ip -n "$ns_a" link set $dev up && ip -n "$ns_b" link set $dev up ||
    {
      echo "FAIL: could not configure the veth pair between $ns_a and $ns_b"
      exit 1
    }
}
