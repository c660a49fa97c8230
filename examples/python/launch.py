"""Starting torch.distributed (gloo) the way each launcher hands out ranks, for the deep_ep
examples: torchrun and shmoerun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Open MPI's mpirun
(OMPI_COMM_WORLD_RANK and _SIZE; MASTER_ADDR and MASTER_PORT passed with -x), or none: `python3 prog.py` spawns NUM_RANKS (2) ranks itself with
torch.multiprocessing.spawn."""

import os
import socket
import sys
from typing import Callable

import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_from_launcher() -> bool:
    env = os.environ
    if "RANK" not in env and "OMPI_COMM_WORLD_RANK" in env:
        env["RANK"], env["WORLD_SIZE"] = env["OMPI_COMM_WORLD_RANK"], env["OMPI_COMM_WORLD_SIZE"]
    return "RANK" in env


def _spawned(rank: int, n: int, port: int, main: Callable[[int, int], None]) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=n)
    main(rank, n)
    dist.destroy_process_group()


def say(line: str) -> None:
    """Prints one line in one write, so that the ranks' lines do not interleave on a shared pipe."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run(main: Callable[[int, int], None]) -> None:
    """Calls main(rank, world_size) on every rank, inside a gloo process group."""
    if _rank_from_launcher():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        dist.init_process_group("gloo")
        main(dist.get_rank(), dist.get_world_size())
        dist.destroy_process_group()
        return
    n = int(os.environ.get("NUM_RANKS", "2"))
    mp.spawn(_spawned, args=(n, _free_port(), main), nprocs=n)
