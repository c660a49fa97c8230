"""Joining the torch.distributed job: the first Buffer starts shmoe on the ranks of its group."""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
from typing import List, Optional, Tuple

import torch.distributed as dist

import shmoe
from shmoe import _build_info
from shmoe._runtime import state

# The job's ranks (in the default group) that shmoe was started over, in PE order.
_members: Optional[List[int]] = None


# Rank 0's config store process (shmoerun --store-only): held, as a Popen dropped while its
# process runs warns.
_store: Optional[subprocess.Popen] = None


def _start_bound_s() -> float:
    """How long the store waits for every PE to come: the PEs' own bound (SHMOE_INIT_TIMEOUT,
    60 s unless set; shmoe.init refuses a bad value itself) and a margin for their start."""
    try:
        return float(os.environ.get("SHMOE_INIT_TIMEOUT", "60")) + 30
    except ValueError:
        return 90.0


def _start_store(size: int, spans_hosts: bool) -> Tuple[str, str]:
    """Rank 0 starts the job's config store as a process of its own, `shmoerun --store-only`, in
    a session of its own, so that neither rank 0's death nor a signal to rank 0's process group
    takes it with it; returns the key and the address. The key goes in the store's environment
    (readable by this user alone), never on its command line. Its life is bounded: it ends when
    every PE has finalized or been lost (each PE's connection ends with its process), when the
    job is aborted, or when not every PE has come within _start_bound_s(). For a group that
    spans hosts it listens on every interface (the key admits the job's PEs alone) and names the
    address other hosts reach it by."""
    global _store
    shmoerun = os.path.normpath(os.path.join(os.path.dirname(shmoe.__file__),
                                             _build_info.SHMOERUN))
    if not os.access(shmoerun, os.X_OK):
        raise RuntimeError(f"deep_ep.Buffer: cannot run the job's config store: {shmoerun} "
                           "(shmoerun, installed with the package shmoe) is not an executable")
    key = secrets.token_hex(32)
    _store = subprocess.Popen(
        [shmoerun, "--store-only", "-n", str(size), "--start-timeout", str(_start_bound_s())]
        + (["--bind", "0.0.0.0"] if spans_hosts else []),
        env=dict(os.environ, SHMOE_JOB_KEY=key), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, start_new_session=True)
    assert _store.stdout is not None
    # Its one line on stdout says where it listens; nothing more comes there, so the pipe may
    # close with rank 0.
    line = _store.stdout.readline().decode(errors="replace")
    _store.stdout.close()
    where = re.search(r"listening on (\S+:\d+)$", line.strip())
    if where is None:
        raise RuntimeError(f"deep_ep.Buffer: the job's config store ({shmoerun} --store-only) "
                           f"did not start (status {_store.wait()}); its stderr says why")
    return key, where.group(1)


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
    over the same ranks): PE i is the group's rank i. Rank 0 of the group starts the config store
    as a process of its own (_start_store), so the job outlives any rank, rank 0 included (with
    SHMOE_PE_LOSS=continue the others go on); its fresh key and its address travel through the
    group (broadcast_object_list), never on a command line. A process runs one shmoe job, so
    every Buffer of a process must be on the same ranks. The ranks of one host share memory,
    and hosts talk over UCX; where torchrun starts several nodes on one machine (--nnodes 2 on
    one host), each node's ranks are a simulated host of their own (SHMOE_HOST_ID, unless set). Under shmoerun
    (its PEs are the group's ranks) the Buffer joins that job instead, whose store shmoerun
    runs."""
    global _members
    size = dist.get_world_size(group)
    rank = dist.get_rank(group)
    mine = (dist.get_rank(), socket.gethostname(), _node(), _under_shmoerun(group))
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
    if len(nodes) > len(hosts) and "SHMOE_HOST_ID" not in os.environ:
        os.environ["SHMOE_HOST_ID"] = f"{socket.gethostname()}.node{_node()}"
    if "SHMEM_SYMMETRIC_SIZE" not in os.environ and "SMA_SYMMETRIC_SIZE" not in os.environ:
        os.environ["SHMEM_SYMMETRIC_SIZE"] = str(heap_bytes)
    if all(e[3] for e in everyone):
        shmoe.init()
    else:
        # After the gather every rank is here, so the store's start bound runs from now. Rank 0's
        # failure to start it goes to every rank.
        where: List = [None]
        if rank == 0:
            try:
                where[0] = _start_store(size, len(hosts) > 1)
            except RuntimeError as e:
                where[0] = str(e)
        dist.broadcast_object_list(where, src=members[0], group=group)
        if isinstance(where[0], str):
            raise RuntimeError(where[0] if rank == 0 else f"{where[0]} (on rank 0)")
        key, store = where[0]
        shmoe.init(rank=rank, size=size, store=store, key=key, store_apart=True)
    _members = members
