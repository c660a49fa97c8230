"""DeepEP's normal (intranode) mode on shmoe.

Dispatch is shmoe's MoE dispatch with one "expert" per rank: a token goes to rank j when
is_token_in_rank[t, j], so each rank receives one row per (token, destination rank), ordered by
source rank then token, as DeepEP's intranode kernels order them. Before it, one fcollect gives
every rank every rank's counts (tokens per rank and per expert, tokens, num_worst_tokens) and its
top-k indices and weights; the received rows' indices and weights are then looked up by (source
rank, token), so nothing but the rows themselves goes through the operator. Combine is shmoe's
combine with weight 1 for every (token, rank): an unweighted sum over ranks in float32, rounded
once to bfloat16 (with bias, the sum is taken in a float32 operator and the bias added before
the rounding, as DeepEP does).

The operators are called directly (shmoe.moe.Buffer.operator) with arrays kept between calls,
as DeepEP's Buffer calls its runtime: received rows and combined tokens come from the
operator's pools of host blocks, which return when the last tensor over them dies."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

import shmoe
import shmoe.moe
from shmoe._runtime import agreed

from .checks import bad, check_range, integer, tensor
from .config import Config

_MIN_CAPACITY = 64


class Handle(tuple):
    """DeepEP's 6-part handle (rank_prefix_matrix, channel_prefix_matrix,
    recv_channel_prefix_matrix, recv_src_idx, is_token_in_rank, send_head), with what combine
    and a cached dispatch need of the operator call."""

    plan: "_Plan"
    routes: np.ndarray  # int32 [tokens, ranks]: j where the token goes to rank j, else -1
    assist: np.ndarray  # int32 [capacity, 3]: (source rank, token, slot) of each received row
    ep_recv: np.ndarray  # int32 [ranks]: inclusive prefix of the rows from each source rank
    rows: int
    tokens: int
    num_topk: int


class _Plan:
    """The operators and arrays of one (hidden, experts, top-k) at a token capacity: the BF16
    dispatch/combine operator (one expert per rank), float32 ones made at first use (combine
    with bias; the top-k weights' combine), and the symmetric rows of the counts exchange."""

    def __init__(self, n: int, capacity: int, hidden: int, experts: int, topk: int) -> None:
        self.n, self.capacity, self.hidden, self.experts, self.topk = n, capacity, hidden, \
            experts, topk
        self.x = self._buffer(hidden, "bfloat16")
        self.wide: Optional[shmoe.moe.Buffer] = None
        self.weights: Optional[shmoe.moe.Buffer] = None
        # Row layout (int64): tokens, num_worst_tokens, tokens per rank [n], tokens per expert
        # [E], then capacity x top-k indices and as many weights (their float32 bits).
        self.header = 2 + n + experts
        self.width = self.header + 2 * capacity * topk
        self.src = shmoe.zeros(self.width, "int64")
        self.dest = shmoe.zeros(n * self.width, "int64")
        self.ones = np.ones((capacity, n), np.float32)
        self.ranks = torch.arange(n, dtype=torch.int32)
        self.closed = False

    def _buffer(self, hidden: int, dtype: str) -> shmoe.moe.Buffer:
        return shmoe.moe.Buffer(self.capacity, hidden, self.n, self.n, dtype,
                                max_recv_rows=self.n * self.capacity)

    def float32(self, which: str) -> shmoe.moe.Buffer:
        """The float32 operator for bias ("wide", hidden columns) or weights (top-k columns)."""
        if which == "wide":
            if self.wide is None:
                self.wide = self._buffer(self.hidden, "float32")
            return self.wide
        if self.weights is None:
            self.weights = self._buffer(self.topk, "float32")
        return self.weights

    def close(self) -> None:
        self.closed = True
        for buf in (self.weights, self.wide, self.x):
            if buf is not None:
                buf.close()
        shmoe.free(self.dest)
        shmoe.free(self.src)


def _host_array(block: Any, dtype: Any) -> np.ndarray:
    """A host block of an operator's pool (buffer protocol) as a flat array; the array keeps
    the block, which goes back to its pool when the last view of it dies."""
    return np.frombuffer(block, dtype)


def _capacity_for(tokens: int) -> int:
    capacity = _MIN_CAPACITY
    while capacity < tokens:
        capacity *= 2
    return capacity


class Normal:
    """The normal-mode half of a deep_ep.Buffer over `num_ranks` ranks (rank `rank`)."""

    def __init__(self, num_ranks: int, rank: int) -> None:
        self.n, self.me = num_ranks, rank
        self.plans: Dict[Tuple[int, int, int], _Plan] = {}  # (hidden, experts, top-k) -> plan

    def close(self) -> None:
        for p in self.plans.values():
            p.close()
        self.plans.clear()

    def _plan(self, hidden: int, experts: int, topk: int, capacity: int) -> _Plan:
        """The plan of this shape with at least `capacity` tokens (collective when it changes:
        every rank asks for the same, from agreed values and the exchange)."""
        key = (hidden, experts, topk)
        p = self.plans.get(key)
        if p is not None and p.capacity >= capacity:
            return p
        if p is not None:
            p.close()
        self.plans[key] = _Plan(self.n, _capacity_for(capacity), hidden, experts, topk)
        return self.plans[key]

    # ---- Layout -----------------------------------------------------------------------------

    def layout(self, call, topk_idx, num_experts):
        """(num_tokens_per_rank int32 [ranks], num_tokens_per_expert int32 [experts],
        is_token_in_rank bool [tokens, ranks]) of this rank's routing; local."""
        n = self.n
        experts = integer(call, "num_experts", num_experts, 1)
        if experts % n:
            raise ValueError(f"{call}: num_experts={experts} is not divisible by the {n} ranks")
        idx = tensor(call, "topk_idx", topk_idx, torch.int64, (None, None))
        check_range(call, "topk_idx", idx, experts)
        routed = idx >= 0
        per_expert = torch.bincount(idx[routed], minlength=experts).to(torch.int32)
        rank_of = torch.where(routed, idx // (experts // n), torch.full_like(idx, n))
        in_rank = torch.zeros((idx.shape[0], n + 1), dtype=torch.bool)
        in_rank.scatter_(1, rank_of, True)
        in_rank = in_rank[:, :n].contiguous()
        return in_rank.sum(dim=0, dtype=torch.int32), per_expert, in_rank

    # ---- Dispatch ---------------------------------------------------------------------------

    def dispatch(self, call, x, num_tokens_per_rank, is_token_in_rank, num_tokens_per_expert,
                 topk_idx, topk_weights, expert_alignment, num_worst_tokens, config):
        n, me = self.n, self.me

        def check():
            if isinstance(x, tuple):
                raise ValueError(f"{call}: x is an (FP8 values, scales) tuple; this build has no "
                                 "SM90 FP8 path (Buffer.is_sm90_compiled() is False): pass "
                                 "bfloat16 x")
            xs = tensor(call, "x", x, torch.bfloat16, (None, None))
            tokens, hidden = xs.shape
            if hidden < 1:
                raise bad(call, "x", x, "[tokens, hidden] with hidden >= 1")
            if num_tokens_per_rank is None or is_token_in_rank is None \
                    or num_tokens_per_expert is None:
                raise ValueError(f"{call}: without handle=, num_tokens_per_rank, "
                                 "is_token_in_rank and num_tokens_per_expert are required")
            if config is not None and not isinstance(config, Config):
                raise bad(call, "config", config, "a deep_ep.Config")
            per_rank = tensor(call, "num_tokens_per_rank", num_tokens_per_rank, torch.int32, (n,))
            in_rank = tensor(call, "is_token_in_rank", is_token_in_rank, torch.bool, (tokens, n))
            per_expert = tensor(call, "num_tokens_per_expert", num_tokens_per_expert,
                                torch.int32, (None,))
            experts = per_expert.shape[0]
            if experts < 1 or experts % n:
                raise bad(call, "num_tokens_per_expert", per_expert,
                          f"[num_experts] with num_experts a positive multiple of the {n} ranks")
            align = integer(call, "expert_alignment", expert_alignment, 1)
            worst = integer(call, "num_worst_tokens", num_worst_tokens)
            idx = w = None
            if (topk_idx is None) != (topk_weights is None):
                raise ValueError(f"{call}: topk_idx and topk_weights go together (one is None)")
            if topk_idx is not None:
                idx = tensor(call, "topk_idx", topk_idx, torch.int64, (tokens, None))
                w = tensor(call, "topk_weights", topk_weights, torch.float32, idx.shape)
                check_range(call, "topk_idx", idx, experts)
            return xs, per_rank, in_rank, per_expert, align, worst, idx, w

        xs, per_rank, in_rank, per_expert, align, worst, idx, w = agreed(
            call, check,
            lambda c: [("hidden", c[0].shape[1]), ("num_experts", c[3].shape[0]),
                       ("num_topk", 0 if c[6] is None else c[6].shape[1])])
        tokens, hidden = xs.shape
        experts = per_expert.shape[0]
        K = 0 if idx is None else idx.shape[1]
        L = experts // n
        plan, table = self._exchange(hidden, experts, K, tokens, worst, per_rank, per_expert,
                                     idx, w)
        sent = table[:, 2:2 + n]  # sent[i, j]: tokens rank i sends to rank j
        rows_of = sent.sum(axis=0)
        worsts = table[:, 1]
        for j in range(n):
            if worsts[j] and worsts[j] < rows_of[j]:
                raise ValueError(f"{call}: rank {j} passed num_worst_tokens={int(worsts[j])}, "
                                 f"fewer than the {int(rows_of[j])} tokens it receives")
        ranks = plan.ranks.expand(tokens, n)
        routes = torch.where(in_rank, ranks, torch.full_like(ranks, -1)).numpy()
        assist, ep_recv = self._side_arrays(plan)
        rows, recv_x = self._send(plan, xs, routes, assist, ep_recv)
        if rows != int(rows_of[me]):
            raise RuntimeError(f"{call}: received {rows} rows where num_tokens_per_rank of the "
                               f"ranks promise {int(rows_of[me])}")
        recv_topk_idx = recv_topk_weights = None
        src, tok = assist[:rows, 0], assist[:rows, 1]
        if K:
            base, span = plan.header, plan.capacity * K
            at = src.astype(np.int64) * plan.capacity + tok  # row of (source rank, token)
            got = np.take(table[:, base:base + span].reshape(-1, K), at, axis=0) - me * L
            bits = np.take(table[:, base + span:base + 2 * span].reshape(-1, K), at, axis=0)
            mine = (got >= 0) & (got < L)
            recv_topk_idx = torch.from_numpy(np.where(mine, got, -1))
            recv_topk_weights = torch.from_numpy(
                np.where(mine, bits.astype(np.int32).view(np.float32), np.float32(0)))
        send_head = torch.where(in_rank, torch.cumsum(in_rank, dim=0, dtype=torch.int32) - 1,
                                torch.full((tokens, n), -1, dtype=torch.int32))
        handle = Handle((torch.from_numpy(np.cumsum(sent, axis=0).astype(np.int32)),
                         torch.from_numpy(sent[me].reshape(n, 1).astype(np.int32)),
                         torch.from_numpy(sent[:, me].reshape(n, 1).astype(np.int32)),
                         torch.from_numpy(tok.astype(np.int32)), in_rank, send_head))
        handle.plan, handle.routes, handle.assist, handle.ep_recv = plan, routes, assist, ep_recv
        handle.rows, handle.tokens, handle.num_topk = rows, tokens, K
        received = table[:, 2 + n + me * L:2 + n + (me + 1) * L].sum(axis=0)
        counts: List[int] = [int(-(-int(c) // align) * align) for c in received]
        if worsts[me]:
            pad = int(worsts[me]) - rows
            recv_x = torch.cat([recv_x, torch.zeros((pad, hidden), dtype=torch.bfloat16)])
            if recv_topk_idx is not None and recv_topk_weights is not None:
                recv_topk_idx = torch.cat([recv_topk_idx,
                                           torch.full((pad, K), -1, dtype=torch.int64)])
                recv_topk_weights = torch.cat([recv_topk_weights,
                                               torch.zeros((pad, K), dtype=torch.float32)])
            counts = []
        return recv_x, recv_topk_idx, recv_topk_weights, counts, handle

    def _exchange(self, hidden, experts, K, tokens, worst, per_rank, per_expert, idx, w):
        """Every rank's exchange row (collective: one fcollect, two when a rank has more tokens
        than the plan holds and every plan grows first). Returns (plan, table [ranks, width])."""
        n = self.n
        plan = self._plan(hidden, experts, K, 0)
        while True:
            row = plan.src
            row[0], row[1] = tokens, worst
            row[2:2 + n] = per_rank.numpy()
            row[2 + n:plan.header] = per_expert.numpy()
            if K and tokens <= plan.capacity:
                span = plan.capacity * K
                row[plan.header:plan.header + tokens * K] = idx.numpy().reshape(-1)
                row[plan.header + span:plan.header + span + tokens * K] = \
                    w.numpy().view(np.int32).reshape(-1)
            shmoe.fcollect(shmoe.team_world(), plan.dest, plan.src)
            table = np.asarray(plan.dest).reshape(n, plan.width)
            most = int(table[:, 0].max())
            if most <= plan.capacity:
                return plan, table  # read before the next exchange overwrites it
            plan = self._plan(hidden, experts, K, most)

    def _side_arrays(self, plan: _Plan):
        """Fresh (assist_info [capacity, 3], ep_recv_count [ranks]) for one dispatch: its handle
        keeps them for the combine."""
        return np.empty((self.n * plan.capacity, 3), np.int32), np.empty(self.n, np.int32)

    def _send(self, plan: _Plan, xs: torch.Tensor, routes: np.ndarray, assist: np.ndarray,
              ep_recv: np.ndarray):
        """The operator's dispatch of xs on `routes`, filling assist and ep_recv: (rows, the
        received rows in a host block of the operator's pool)."""
        op = plan.x.operator
        block = _host_array(op.take_rows(), np.int16)
        nums = np.empty(1, np.int32)
        rows = op.dispatch(False, xs.view(torch.int16).numpy(), routes, None, xs.shape[0], block,
                           assist, ep_recv, nums, None)
        received = block[:rows * plan.hidden].reshape(rows, plan.hidden)
        return rows, torch.from_numpy(received).view(torch.bfloat16)

    def cached_dispatch(self, call, x, handle, topk_idx, topk_weights):
        def check():
            self._require_current(call, handle)
            if topk_idx is not None or topk_weights is not None:
                raise ValueError(f"{call}: a cached dispatch (handle=) takes no topk_idx or "
                                 "topk_weights")
            return tensor(call, "x", x, torch.bfloat16, (handle.tokens, handle.plan.hidden))

        xs = agreed(call, check)
        return self._send(handle.plan, xs, handle.routes, *self._side_arrays(handle.plan))[1]

    def _require_current(self, call: str, handle: Any) -> None:
        if not isinstance(handle, Handle) or not hasattr(handle, "plan"):
            raise bad(call, "handle", handle, "the handle a dispatch of this buffer returned")
        if handle.plan.closed:
            raise ValueError(f"{call}: handle is stale: the buffer has grown or changed shape "
                             "since that dispatch")

    # ---- Combine ----------------------------------------------------------------------------

    def combine(self, call, x, handle, topk_weights, bias):
        def check():
            self._require_current(call, handle)
            p = handle.plan
            xs = tensor(call, "x", x, torch.bfloat16, (None, p.hidden))
            if xs.shape[0] < handle.rows:
                raise bad(call, "x", x, f"[{handle.rows} received rows, {p.hidden}]")
            w = None
            if topk_weights is not None:
                if not handle.num_topk:
                    raise ValueError(f"{call}: topk_weights given, but the dispatch of handle "
                                     "carried no top-k")
                w = tensor(call, "topk_weights", topk_weights, torch.float32,
                           (None, handle.num_topk))
                if w.shape[0] < handle.rows:
                    raise bad(call, "topk_weights", w, f"[{handle.rows}, {handle.num_topk}]")
                w = w[:handle.rows].contiguous()
            biases = bias if isinstance(bias, tuple) else (() if bias is None else (bias,))
            if len(biases) > 2:
                raise ValueError(f"{call}: bias is at most two tensors, not {len(biases)}")
            biases = tuple(tensor(call, f"bias[{i}]", b, torch.bfloat16,
                                  (handle.tokens, p.hidden)) for i, b in enumerate(biases))
            return xs[:handle.rows], w, biases

        xs, w, biases = agreed(call, check, lambda c: [
            ("with top-k weights", int(c[1] is not None)), ("bias tensors", len(c[2]))])
        p, tokens = handle.plan, handle.tokens
        if biases:
            # DeepEP adds the bias to the float32 sum and rounds once.
            total = Normal._reduce(p.float32("wide"), handle, xs.to(torch.float32).numpy(),
                                 np.float32, p.hidden)
            for b in biases:
                total += b.to(torch.float32)
            combined = total.to(torch.bfloat16)
        else:
            combined = Normal._reduce(p.x, handle, xs.view(torch.int16).numpy(), np.int16,
                                    p.hidden).view(torch.bfloat16)
        combined_w = None
        if w is not None:
            combined_w = Normal._reduce(p.float32("weights"), handle, w.numpy(), np.float32,
                                      handle.num_topk)
        return combined, combined_w

    @staticmethod
    def _reduce(buf: shmoe.moe.Buffer, h: Handle, rows: np.ndarray, dtype: Any,
                width: int) -> torch.Tensor:
        """buf's combine of `rows` on h's routing with weight 1: [tokens, width] of dtype, in
        a host block of buf's pool."""
        op = buf.operator
        out = _host_array(op.take_token_rows(), dtype)[:h.tokens * width]
        op.combine(False, rows, h.assist, h.ep_recv, h.routes, h.plan.ones[:h.tokens], h.tokens,
                   out)
        return torch.from_numpy(out.reshape(h.tokens, width))

