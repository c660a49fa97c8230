"""Shrink mode of deep_ep.Buffer (enable_shrink=True), as DeepEP's: low_latency_dispatch,
low_latency_combine and clean_low_latency_buffer never wait for a rank longer than
SHMOE_SHRINK_TIMEOUT_MS (default 10000); a rank that has not arrived by then is masked, and the
calls go on without it (its rows are left out, its experts' terms are left out of the sums).

The mask is one int32 tensor [num_ranks] per Buffer (1: masked), shared by every low-latency
shape; the calls update it, and the low_latency_*_mask_buffer methods read or change it.

What a failed rank changes, and what this package decided about it:
* The calls agree on nothing beforehand (shmoe's agreement waits for every rank): each rank
  checks its own arguments, raises alone if they are wrong, and the others mask it.
* shmoe's operators of a shape are made collectively (symmetric memory, with every rank), which
  a failed rank would hold up forever. So the Buffer makes them up front, at construction (every
  rank is there): for each shape this process asked get_low_latency_rdma_size_hint about (the
  way DeepEP sizes num_rdma_bytes), with room for up to 11 experts per token (DeepEP's
  low-latency limit; calls with fewer pad with -1). A shape first used later is made at its
  first call, which every rank must then make while all are live; a rank that already masks
  some rank refuses to (with an error) instead of waiting for it.
* A rank comes back (a stopped rank that resumed) through a rejoin, which every rank makes, at
  a clean_low_latency_buffer: every other live rank unmasks it (low_latency_update_mask_buffer
  (rank, False)), the rank itself unmasks the others (low_latency_clean_mask_buffer()), and the
  next clean_low_latency_buffer of each is then a rejoin instead of a barrier of the live ranks.
  A rejoin waits for every rank, masked or not (a dead one costs the bound): those that arrive
  are live again, and every operator of the Buffer goes on from the same call counters.
* destroy() frees nothing collectively (a failed rank calls it while the others still run, or
  never): this rank's operators are given up and their symmetric memory stays until the
  process ends; shmoe itself is finalized at the process's exit (a barrier of every rank: where
  a rank has really died, the others stop there after SHMOE_HANG_TIMEOUT with a hang report).
"""

from __future__ import annotations

import os
import zlib
from typing import List, Set, Tuple

import numpy as np
import torch

import shmoe
import shmoe.moe
from shmoe._runtime import agreed

from .checks import tensor

ENV = "SHMOE_SHRINK_TIMEOUT_MS"
DEFAULT_TIMEOUT_MS = 10000
MAX_TOPK = 11  # DeepEP's low-latency dispatch takes at most 11 experts per token

# The low-latency shapes (max tokens, hidden, ranks, experts) this process asked the size hint
# about, in order: a shrink-mode Buffer makes their operators up front.
hinted: List[Tuple[int, int, int, int]] = []


def remember(shape: Tuple[int, int, int, int]) -> None:
    if shape not in hinted:
        hinted.append(shape)


def area_topk(num_experts: int, num_topk: int) -> int:
    """The experts per token a shrink-mode shape's operators hold: room for DeepEP's limit, so
    that the operators made up front (top-k unknown) serve every call; more only for a call
    that passes more (made at that call)."""
    return max(num_topk, min(num_experts, MAX_TOPK))


def timeout_ms(call: str) -> int:
    text = os.environ.get(ENV)
    if text is None:
        return DEFAULT_TIMEOUT_MS
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 or value >= 1 << 31:
        raise ValueError(f"{call}: {ENV}={text!r} must be an int of milliseconds in "
                         f"1..{(1 << 31) - 1}, below SHMOE_HANG_TIMEOUT")
    return value


class Shrink:
    """A Buffer's mask, and the small operator whose sync_live is clean_low_latency_buffer's
    barrier of the live ranks (made now, collectively, while every rank is here)."""

    def __init__(self, call: str, num_ranks: int, rank: int, ms: int) -> None:
        self.num_ranks, self.rank, self.timeout_ms = num_ranks, rank, ms
        self.mask = torch.zeros(num_ranks, dtype=torch.int32)
        # Since the last clean: the ranks unmasked by hand, and whether the whole mask was
        # cleared; either makes the next clean a rejoin (see the module's docstring).
        self.unmasked: Set[int] = set()
        self.cleared = False
        self.mask_np: np.ndarray = self.mask.numpy()  # the operators write the tensor's memory
        try:
            self.sync = shmoe.MoeBuffer(1, 1, num_ranks, 1, "int32", shrink_timeout_ms=ms)
        except shmoe.Error as e:
            raise ValueError(f"{call}: {ENV}={ms}: {e}") from e

    def any_masked(self) -> bool:
        return bool(self.mask_np.any())

    def sync_live(self) -> None:
        self.sync.sync_live(self.mask_np)

    def query(self, call: str, mask_status: torch.Tensor) -> None:
        tensor(call, "mask_status", mask_status, torch.int32, (self.num_ranks,))
        mask_status.copy_(self.mask)

    def update(self, call: str, rank_to_mask: int, mask: bool) -> None:
        if isinstance(rank_to_mask, bool) or not isinstance(rank_to_mask, int) \
                or not 0 <= rank_to_mask < self.num_ranks:
            raise ValueError(f"{call}: rank_to_mask={rank_to_mask!r} is out of range "
                             f"(0..{self.num_ranks - 1})")
        if mask and rank_to_mask == self.rank:
            # The operators refuse a mask that holds the calling rank itself.
            raise ValueError(f"{call}: rank_to_mask={rank_to_mask} is this rank, which cannot "
                             "mask itself")
        if not mask and int(self.mask[rank_to_mask]):
            self.unmasked.add(rank_to_mask)
        if mask:
            self.unmasked.discard(rank_to_mask)
        self.mask[rank_to_mask] = 1 if mask else 0

    def clean(self) -> None:
        self.unmasked.update(int(r) for r in self.mask.nonzero().view(-1).tolist())
        self.cleared = True
        self.mask.zero_()

    def rejoin_wanted(self) -> bool:
        """Whether this clean is a rejoin: a rank unmasked by hand is still unmasked, or the
        mask was cleared and nothing is masked since (a rank that comes back)."""
        return any(not int(self.mask[r]) for r in self.unmasked) or (
            self.cleared and not self.any_masked())

    def barrier(self, others: List[shmoe.MoeBuffer]) -> None:
        """clean_low_latency_buffer's step: a rejoin of every rank that brings `others` (the
        Buffer's operators) to the same counters, or a barrier of the live ranks."""
        if self.rejoin_wanted():
            self.sync.rejoin(self.mask_np, others)
        else:
            self.sync_live()
        self.unmasked.clear()
        self.cleared = False

    def abandon(self) -> None:
        self.sync.abandon()


def agreed_hints(call: str, num_ranks: int) -> List[Tuple[int, int, int]]:
    """The (max tokens, hidden, experts) of the hinted shapes of this job's size, which every
    rank must have asked about alike (the operators are made collectively)."""
    # Only shapes a low-latency call can take (the hint itself accepts any numbers).
    shapes = [(m, h, e) for m, h, n, e in hinted
              if n == num_ranks and m > 0 and h > 0 and h % 128 == 0 and e > 0
              and e % num_ranks == 0]
    agreed(call, lambda: shapes, lambda s: [
        ("low-latency shapes asked of get_low_latency_rdma_size_hint", len(s)),
        ("their checksum", zlib.crc32(repr(s).encode()))])
    return shapes
