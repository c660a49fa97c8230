"""Shrink mode of deep_ep.Buffer (enable_shrink=True), as DeepEP's: low_latency_dispatch,
low_latency_combine and clean_low_latency_buffer never wait for a rank longer than
SHMOE_SHRINK_TIMEOUT_MS (default 10000); a rank that has not arrived by then is masked, and the
calls go on without it (its rows are left out, its experts' terms are left out of the sums).

The runtime (_shmoe.LowLatencyBuffer, shmoe/deep_ep.h) holds it: the mask, the barrier and the
rejoin, the operators made up front; this module keeps the shapes asked of the size hint.

The mask is one int32 array [num_ranks] per Buffer (1: masked), shared by every low-latency
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
from typing import List, Tuple

from shmoe import _shmoe

ENV = "SHMOE_SHRINK_TIMEOUT_MS"
DEFAULT_TIMEOUT_MS = 10000
MAX_TOPK = 11  # DeepEP's low-latency dispatch takes at most 11 experts per token

# The low-latency shapes (max tokens, hidden, ranks, experts) this process asked the size hint
# about, in order: a shrink-mode Buffer makes their operators up front.
hinted: List[Tuple[int, int, int, int]] = []


def remember(shape: Tuple[int, int, int, int]) -> None:
    if shape not in hinted:
        hinted.append(shape)


def timeout_ms(call: str) -> int:
    """SHMOE_SHRINK_TIMEOUT_MS (default 10000), checked by the runtime."""
    return int(_shmoe.shrink_timeout_ms(os.environ.get(ENV)))
