"""Shared by the client tests: spawned gloo jobs (torch.multiprocessing.spawn, no shmoerun), as
a framework's own launcher starts its ranks. SHMOE_TEST_CLIENT_RANKS sets the job size (2 in CI, 4 by
hand)."""

import os
import socket
import traceback

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

RANKS = int(os.environ.get("SHMOE_TEST_CLIENT_RANKS", "2"))

# bfloat16's unit roundoff (8 significand bits): the tolerances of the comparisons are multiples
# of it, each derived where it is used.
BF16_U = 2.0 ** -8


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, n, port, failures, scenario, args):
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=n,
                                rank=rank)
        scenario(rank, n, *args)
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:
        failures.put(f"rank {rank}: {traceback.format_exc()}")
        raise


def spawn_ranks(scenario, n=RANKS, *args):
    """Runs scenario(rank, n, *args) in n spawned processes of one gloo job; a rank that fails
    puts its traceback in a queue, and the test fails with every rank's."""
    ctx = mp.get_context("spawn")
    failures = ctx.SimpleQueue()
    try:
        mp.spawn(_worker, args=(n, _free_port(), failures, scenario, args), nprocs=n)
    except Exception:
        lines = []
        while not failures.empty():
            lines.append(failures.get())
        pytest.fail("\n".join(lines) or "a rank failed")


def close_enough(what, got, ref, scale, ulps, scale_name="max |reference|"):
    """|got - ref| <= ulps * BF16_U * scale elementwise, scale being the largest reference value
    of the tensor: two bf16 computations of the same sums, rounded in other places, differ by a
    few roundings of the terms they sum, which the tensor's largest value bounds (an element
    whose terms cancel keeps the error of its terms, not of its small result); or, as
    scale_name says, a per-element magnitude of the terms. Rank 0 prints the worst error found,
    as a fraction of the bound."""
    import torch

    got, ref = got.detach(), ref.detach()
    err = (got.double() - ref.double()).abs()
    bound = torch.broadcast_to(ulps * BF16_U * scale.detach().double(), err.shape)
    worst = float((err / bound.clamp_min(1e-30)).max()) if err.numel() else 0.0
    if dist.get_rank() == 0:
        print(f"  {what}: max |err| {float(err.max()) if err.numel() else 0.0:.3e}, "
              f"{worst:.2f} of the bound ({ulps} x 2^-8 x {scale_name})", flush=True)
    bad = err > bound
    if bool(bad.any()):
        at = tuple(int(i) for i in bad.nonzero()[0])
        raise AssertionError(f"{what}: at {at}, {float(got[at])} vs reference {float(ref[at])} "
                             f"(|err| {float(err[at]):.3e} > bound {float(bound[at]):.3e})")
    return torch.tensor(worst)
