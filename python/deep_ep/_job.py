"""Joining the torch.distributed job: the first Buffer starts shmoe on the ranks of its group."""

from __future__ import annotations

import os
import secrets
import socket
from typing import List, Optional

import torch.distributed as dist

import shmoe
from shmoe._runtime import state

# The job's ranks (in the default group) that shmoe was started over, in PE order.
_members: Optional[List[int]] = None


def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _node() -> str:
    """This rank's node as the launcher numbers them: torchrun's GROUP_RANK, else one node."""
    return os.environ.get("GROUP_RANK", "0")


def _under_shmoerun(group: "dist.ProcessGroup") -> bool:
    """Whether shmoerun started this process as PE `rank` of a job of the group's ranks: then the
    Buffer joins that job, whose store shmoerun runs."""
    env = os.environ
    return "SHMOE_STORE" in env and env.get("SHMOE_RANK") == str(dist.get_rank(group)) \
        and env.get("SHMOE_SIZE") == str(dist.get_world_size(group)) \
        and dist.get_world_size(group) == dist.get_world_size()


def join(group: "dist.ProcessGroup", heap_bytes: int) -> None:
    """Starts shmoe over the ranks of `group` (collective over the group; nothing once started
    over the same ranks): PE i is the group's rank i. Rank 0 of the group makes a fresh key and
    picks a free loopback port for the config store it will run; both travel through the group
    (all_gather_object), never on a command line. A process runs one shmoe job, so every Buffer
    of a process must be on the same ranks. Where torchrun starts several nodes on this machine
    (--nnodes 2 on one host), each node's ranks are a simulated host of their own
    (SHMOE_HOST_ID, unless set): shared memory inside a node, UCX between nodes. Under shmoerun
    (its PEs are the group's ranks) the Buffer joins shmoerun's job instead."""
    global _members
    size = dist.get_world_size(group)
    rank = dist.get_rank(group)
    mine = (dist.get_rank(), socket.gethostname(), _node(),
            (secrets.token_hex(32), f"127.0.0.1:{_free_loopback_port()}") if rank == 0 else None)
    everyone: List = [None] * size
    dist.all_gather_object(everyone, mine, group=group)
    members = [int(e[0]) for e in everyone]
    hosts = sorted({e[1] for e in everyone})
    nodes = {e[2] for e in everyone}
    if state.initialized:
        if members != _members:
            raise ValueError(f"deep_ep.Buffer: group holds the job's ranks {members}, but this "
                             f"process already runs shmoe over ranks {_members}: every Buffer "
                             "of a process must be on the same ranks")
        return
    if len(hosts) > 1:
        raise ValueError(f"deep_ep.Buffer: group spans the hosts {', '.join(hosts)}; a Buffer "
                         "starts shmoe over one host's ranks (shared memory)")
    key, store = everyone[0][3]
    if len(nodes) > 1 and "SHMOE_HOST_ID" not in os.environ:
        os.environ["SHMOE_HOST_ID"] = f"{hosts[0]}.node{_node()}"
    if "SHMEM_SYMMETRIC_SIZE" not in os.environ and "SMA_SYMMETRIC_SIZE" not in os.environ:
        os.environ["SHMEM_SYMMETRIC_SIZE"] = str(heap_bytes)
    if _under_shmoerun(group):
        shmoe.init()
    else:
        shmoe.init(rank=rank, size=size, store=store, key=key)
    _members = members
