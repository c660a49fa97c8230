"""get_physical_domain_size and get_logical_domain_size: a group's (hosts, ranks per host).

shmoe learns its hosts when a job starts, which may be after these are called, so they ask the
group itself: each rank's host is SHMOE_HOST_ID where set (the simulated hosts of the tests and
of DeepEP's init_dist under scripts/deepep-tests.sh), else its hostname and torchrun node
(GROUP_RANK), as deep_ep's job makes each torchrun node a host of its own (_job.join)."""

from __future__ import annotations

import os
import socket
from typing import Dict, List, Optional, Tuple

import torch.distributed as dist

# Per group: a group's hosts do not change, and the first call is the collective one.
_physical: Dict["dist.ProcessGroup", Tuple[int, int]] = {}


def _host() -> str:
    host_id = os.environ.get("SHMOE_HOST_ID")
    if host_id:
        return host_id
    return f"{socket.gethostname()}.node{os.environ.get('GROUP_RANK', '0')}"


def _domain(call: str, hosts: List[str]) -> Tuple[int, int]:
    """(hosts, ranks per host) of ranks on `hosts` (one entry per rank, in rank order); the ranks
    must be node-major with as many on every host."""
    blocks: List[str] = []
    for h in hosts:
        if not blocks or blocks[-1] != h:
            blocks.append(h)
    per_host = len(hosts) // len(blocks)
    if len(set(blocks)) != len(blocks) or per_host * len(blocks) != len(hosts) \
            or any(hosts.count(h) != per_host for h in blocks):
        raise ValueError(f"{call}: the group's ranks must be node-major with as many ranks on "
                         f"every host; its ranks' hosts are {hosts}")
    return len(blocks), per_host


def get_physical_domain_size(group: Optional["dist.ProcessGroup"]) -> Tuple[int, int]:
    """(number of hosts, ranks per host) of `group` (None: the default group); DeepEP's
    (RDMA ranks, NVLink ranks). Collective over the group at its first call."""
    call = "deep_ep.get_physical_domain_size"
    if not dist.is_initialized():
        raise RuntimeError(f"{call}: torch.distributed is not initialized")
    g = group if group is not None else dist.group.WORLD
    if g is None:
        raise RuntimeError(f"{call}: group is None and there is no default group")
    if g not in _physical:
        hosts: List[Optional[str]] = [None] * dist.get_world_size(g)
        dist.all_gather_object(hosts, _host(), group=g)
        _physical[g] = _domain(call, [str(h) for h in hosts])
    return _physical[g]


def get_logical_domain_size(group: Optional["dist.ProcessGroup"],
                            allow_hybrid_mode: bool = True) -> Tuple[int, int]:
    """DeepEP's (scale-out ranks, scale-up ranks): the physical domain with allow_hybrid_mode,
    else one domain of every rank, (1, group size)."""
    num_hosts, per_host = get_physical_domain_size(group)
    return (num_hosts, per_host) if allow_hybrid_mode else (1, num_hosts * per_host)
