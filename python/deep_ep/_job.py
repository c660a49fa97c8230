"""Joining the torch.distributed job: the first Buffer starts shmoe on the ranks of its group."""

from __future__ import annotations

import os
import secrets
import socket

import torch.distributed as dist

import shmoe
from shmoe._runtime import state


def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def join(group: "dist.ProcessGroup", heap_bytes: int) -> None:
    """Starts shmoe on every rank of `group` (collective over the group; nothing once started).
    Rank 0 makes a fresh key and picks a free loopback port for the config store it will run;
    both travel through the group (all_gather_object), never on a command line."""
    size = dist.get_world_size(group)
    rank = dist.get_rank(group)
    if size != dist.get_world_size() or rank != dist.get_rank():
        raise ValueError(f"deep_ep.Buffer: group has {size} ranks of the job's "
                         f"{dist.get_world_size()} (or another order); this implementation needs "
                         "the group of the whole job (ranks in order)")
    if state.initialized:
        if shmoe.n_pes() != size:
            raise ValueError(f"deep_ep.Buffer: shmoe runs {shmoe.n_pes()} PEs but group has "
                             f"{size} ranks")
        return
    mine = (secrets.token_hex(32), f"127.0.0.1:{_free_loopback_port()}") if rank == 0 else None
    everyone = [None] * size
    dist.all_gather_object(everyone, mine, group=group)
    key, store = everyone[0]  # type: ignore[misc]
    if "SHMEM_SYMMETRIC_SIZE" not in os.environ and "SMA_SYMMETRIC_SIZE" not in os.environ:
        os.environ["SHMEM_SYMMETRIC_SIZE"] = str(heap_bytes)
    shmoe.init(rank=rank, size=size, store=store, key=key)
