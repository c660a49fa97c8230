"""DeepEP's normal (intranode) mode on shmoe.

Dispatch is shmoe's MoE dispatch with one "expert" per rank: a token goes to rank j when
is_token_in_rank[t, j], so each rank receives one row per (token, destination rank), ordered by
source rank then token, as DeepEP's intranode kernels order them. Each token's top-k indices and
weights travel with its rows (the operator's token side data), and each rank's top-k width,
num_worst_tokens and tokens per expert reach every rank in the operator's call header, so a
dispatch is one operator call and nothing else is exchanged (_shmoe.deep_ep_normal_dispatch
builds DeepEP's outputs around it). Combine is shmoe's combine with weight 1 for every (token,
rank): an unweighted sum over ranks in float32, rounded once to bfloat16 (with bias, the
operator returns the float32 sums and the bias is added before the rounding, as DeepEP does).

A rank whose arguments are wrong still joins the operator's call, refusing it, so every rank
raises at once (the refusing rank its own error, the others one naming it); a call the current
operators cannot hold (more tokens, another shape) is retried on every rank after a collective
replan.
The operators are called directly (shmoe.MoeBuffer.operator) with arrays kept between calls,
as DeepEP's Buffer calls its runtime: received rows and combined tokens come from the
operator's pools of host blocks, which return when the last tensor over them dies."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

import shmoe
import shmoe.moe
from shmoe import _shmoe
from shmoe._runtime import agreed

from .checks import bad, check_range, integer, tensor, tensor_rows
from .config import Config

_MIN_CAPACITY = 64
# The operator's verdicts of a rank that does not proceed (shmoe_call_verdict_t).
_REFUSE, _RETRY = 1, 2
# Header ints of a dispatch, before its tokens per expert: top-k and num_worst_tokens.
_HEADER = 2


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
    """The operators of one (hidden, experts) at a token capacity and top-k: the BF16
    dispatch/combine operator (one expert per rank), whose header carries every rank's top-k,
    num_worst_tokens and tokens per expert and whose rows carry each token's top-k indices and
    weights, and the float32 one of the top-k weights' combine, made at first use.
    Every rank holds the same plan: plans change only in Normal._replan, which is collective."""

    def __init__(self, n: int, capacity: int, hidden: int, experts: int, topk: int) -> None:
        self.n, self.capacity, self.hidden, self.experts, self.topk = n, capacity, hidden, \
            experts, topk
        # Each token's side data (int32): its top-k indices, then its weights' float32 bits.
        self.side_width = 2 * max(topk, 1)
        self.x = self._buffer(hidden, "bfloat16", token_side_bytes=4 * self.side_width,
                              header_ints=_HEADER + experts)
        self.weights: Optional[shmoe.MoeBuffer] = None
        self.wide: Dict[int, shmoe.MoeBuffer] = {}  # combine operators of other widths
        self.ones = np.ones((capacity, n), np.float32)
        self.no_side = np.zeros((capacity, self.side_width), np.int32)  # a cached dispatch's
        self.no_ints = np.zeros(_HEADER + experts, np.int32)
        self.closed = False

    def fits(self, hidden: int, experts: int, topk: int, tokens: int) -> bool:
        return (hidden, experts) == (self.hidden, self.experts) and topk <= self.topk \
            and tokens <= self.capacity

    def _buffer(self, hidden: int, dtype: str, **side: int) -> shmoe.MoeBuffer:
        return shmoe.MoeBuffer(self.capacity, hidden, self.n, self.n, dtype,
                                max_recv_rows=self.n * self.capacity, **side)

    def float32_weights(self) -> shmoe.MoeBuffer:
        """The float32 operator of the top-k weights' combine (top-k columns), made at first use
        (collective: every rank combines weights alike, see Normal.combine)."""
        if self.weights is None:
            self.weights = self._buffer(self.topk, "float32")
        return self.weights

    def combine_buffer(self, hidden: int) -> shmoe.MoeBuffer:
        """The BF16 operator that combines rows of `hidden` elements: the dispatch's own, or,
        where the dispatch moved another dtype (whose rows are `self.hidden` 2-byte units), one
        of that width on the same routing, made at first use (collective: every rank combines
        alike)."""
        if hidden == self.hidden:
            return self.x
        if hidden not in self.wide:
            self.wide[hidden] = self._buffer(hidden, "bfloat16")
        return self.wide[hidden]

    def close(self, abandon: bool = False) -> None:
        self.closed = True
        for buf in (self.weights, *self.wide.values(), self.x):
            if buf is not None:
                buf.abandon() if abandon else buf.close()


def _host_array(block: Any, dtype: Any) -> np.ndarray:
    """A host block of an operator's pool (buffer protocol) as a flat array; the array keeps
    the block, which goes back to its pool when the last view of it dies."""
    return np.frombuffer(block, dtype)


def _capacity_for(tokens: int) -> int:
    capacity = _MIN_CAPACITY
    while capacity < tokens:
        capacity *= 2
    return capacity


def _units(xs: torch.Tensor) -> int:
    """The 2-byte units of one of xs's rows: a row of any dtype travels as that many bf16."""
    return xs.shape[1] * xs.element_size() // 2


def _shape(args: Any) -> Tuple[int, int, int, int]:
    """(row units, experts, top-k, tokens) of a dispatch's checked arguments."""
    xs, idx, per_expert = args[0], args[6], args[3]
    return _units(xs), per_expert.shape[0], 0 if idx is None else idx.shape[1], xs.shape[0]


class Normal:
    """The normal-mode half of a deep_ep.Buffer over `num_ranks` ranks (rank `rank`)."""

    def __init__(self, num_ranks: int, rank: int) -> None:
        self.n, self.me = num_ranks, rank
        self.plan: Optional[_Plan] = None

    def close(self, abandon: bool = False) -> None:
        """Frees the plan's operators, collectively; with abandon on this rank alone (shrink
        mode, where some rank may never call this)."""
        if self.plan is not None:
            self.plan.close(abandon)
            self.plan = None

    def _replan(self, call: str, convert: Any, shape: Tuple[int, int, int, int]) -> _Plan:
        """Collective, every rank alike (after a retry, or at the first dispatch): agrees on
        the call's arguments (hidden, experts, top-k) and makes the plan that holds every
        rank's tokens, unless the current one does."""
        agreed(call, convert, lambda _: [("x's row size (hidden x element bytes / 2)", shape[0]),
                                         ("num_experts", shape[1]), ("num_topk", shape[2])])
        mine = shmoe.zeros(1, "int64")
        most = shmoe.zeros(self.n, "int64")
        try:
            mine[0] = shape[3]
            shmoe.fcollect(shmoe.team_world(), most, mine)
            tokens = int(np.asarray(most).max())
        finally:
            shmoe.free(most)
            shmoe.free(mine)
        hidden, experts, topk = shape[:3]
        p = self.plan
        if p is not None and p.fits(hidden, experts, topk, tokens):
            return p
        if p is not None and (hidden, experts) == (p.hidden, p.experts):
            topk, tokens = max(topk, p.topk), max(tokens, p.capacity)
        self.close()
        self.plan = _Plan(self.n, _capacity_for(tokens), hidden, experts, topk)
        return self.plan

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
            xs = tensor_rows(call, "x", x)
            tokens, hidden = xs.shape
            if hidden < 1 or hidden * xs.element_size() % 2:
                raise bad(call, "x", x, "[tokens, hidden] with hidden >= 1, of any dtype whose "
                          "rows are whole 2-byte units (DeepEP asks for 16-byte rows)")
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

        while True:
            plan, args, error = self.plan, None, None
            try:
                args = check()
            except Exception as e:  # every rank learns it from the operator's header
                error = e
            if plan is None:
                if error is not None:
                    agreed(call, check)  # raises: the first dispatch has no operator yet
                plan = self._replan(call, lambda: args, _shape(args))
            got = self._dispatch(call, plan, args, error)
            if got is not None:
                break
            self._replan(call, lambda: args, _shape(args))  # some rank asked for a retry
        xs, per_rank, in_rank, per_expert, align, worst, idx, w = args
        (rows, recv_x, routes, assist, ep_recv, recv_topk_idx, recv_topk_weights, prefix,
         channel, recv_channel, src_idx, send_head, per_local, _) = got
        tokens, hidden = xs.shape
        K = 0 if idx is None else idx.shape[1]
        recv_x = torch.from_numpy(recv_x).view(xs.dtype)
        if recv_topk_idx is not None:
            recv_topk_idx = torch.from_numpy(recv_topk_idx)
            recv_topk_weights = torch.from_numpy(recv_topk_weights)
        handle = Handle((torch.from_numpy(prefix), torch.from_numpy(channel),
                         torch.from_numpy(recv_channel), torch.from_numpy(src_idx), in_rank,
                         torch.from_numpy(send_head)))
        handle.plan, handle.routes, handle.assist, handle.ep_recv = plan, routes, assist, ep_recv
        handle.rows, handle.tokens, handle.num_topk = rows, tokens, K
        handle.dtype, handle.hidden = xs.dtype, hidden
        if worst:
            pad = worst - rows
            recv_x = torch.cat([recv_x, torch.zeros((pad, hidden), dtype=xs.dtype)])
            if recv_topk_idx is not None and recv_topk_weights is not None:
                recv_topk_idx = torch.cat([recv_topk_idx,
                                           torch.full((pad, K), -1, dtype=torch.int64)])
                recv_topk_weights = torch.cat([recv_topk_weights,
                                               torch.zeros((pad, K), dtype=torch.float32)])
            return recv_x, recv_topk_idx, recv_topk_weights, [], handle
        num_recv: List[int] = ((per_local + (align - 1)) // align * align).tolist()
        return recv_x, recv_topk_idx, recv_topk_weights, num_recv, handle

    def _dispatch(self, call: str, plan: _Plan, args: Any, error: Optional[Exception]):
        """The operator's dispatch of checked `args`, with this rank's verdict: refuse (its check
        raised `error`, which is raised here once every rank knows), retry (the plan does not
        hold the call; returns None, on every rank alike, when any rank asked) or proceed:
        _shmoe.deep_ep_normal_dispatch's tuple (rows, recv_x, routes, src_info,
        layout_prefix, the received top-k, the handle's matrices, tokens per local expert)."""
        op = plan.x.operator
        if error is not None or not plan.fits(*_shape(args)):
            nothing = np.empty(0, np.int32)  # read by no one: the verdict says so
            try:
                op.dispatch(False, nothing, nothing, None, 0, nothing, nothing, nothing, nothing,
                            None, verdict=_REFUSE if error is not None else _RETRY)
            except shmoe.Error:
                if error is None:
                    raise  # another rank refused
            if error is not None:
                raise error
            return None
        xs, per_rank, in_rank, per_expert, align, worst, idx, w = args
        K = 0 if idx is None else idx.shape[1]
        return _shmoe.deep_ep_normal_dispatch(
            op, call, self.me, xs.view(torch.int16).numpy(), in_rank.numpy(),
            None if idx is None else idx.numpy(), None if w is None else w.numpy(), K,
            per_expert.numpy(), worst, plan.side_width)

    def _side_arrays(self, plan: _Plan):
        """Fresh (src_info [capacity, 3], layout_prefix [ranks]) for one dispatch: its handle
        keeps them for the combine."""
        return np.empty((self.n * plan.capacity, 3), np.int32), np.empty(self.n, np.int32)

    def _send(self, plan: _Plan, xs: torch.Tensor, routes: np.ndarray, assist: np.ndarray,
              ep_recv: np.ndarray):
        """The operator's dispatch of xs on `routes` with no side data (a cached dispatch),
        filling assist and ep_recv: the received rows in a host block of the operator's pool."""
        op = plan.x.operator
        block = _host_array(op.take_rows(), np.int16)
        rows = op.dispatch(False, xs.view(torch.int16).numpy(), routes, None, xs.shape[0], block,
                           assist, ep_recv, np.empty(1, np.int32), None,
                           token_side=plan.no_side, header_ints=plan.no_ints)
        received = block[:rows * plan.hidden].reshape(rows, plan.hidden)
        return torch.from_numpy(received).view(xs.dtype)

    def cached_dispatch(self, call, x, handle, topk_idx, topk_weights):
        def check():
            self._require_current(call, handle)
            if topk_idx is not None or topk_weights is not None:
                raise ValueError(f"{call}: a cached dispatch (handle=) takes no topk_idx or "
                                 "topk_weights")
            return tensor(call, "x", x, handle.dtype, (handle.tokens, handle.hidden))

        xs = agreed(call, check)
        return self._send(handle.plan, xs, handle.routes, *self._side_arrays(handle.plan))

    def _require_current(self, call: str, handle: Any) -> None:
        if not isinstance(handle, Handle) or not hasattr(handle, "plan"):
            raise bad(call, "handle", handle, "the handle a dispatch of this buffer returned")
        if handle.plan.closed or handle.plan is not self.plan:
            raise ValueError(f"{call}: handle is stale: the buffer has grown or changed shape "
                             "since that dispatch")

    # ---- Combine ----------------------------------------------------------------------------

    def combine(self, call, x, handle, topk_weights, bias):
        def check():
            self._require_current(call, handle)
            hidden = handle.hidden
            xs = tensor(call, "x", x, torch.bfloat16, (None, hidden))
            if xs.shape[0] < handle.rows:
                raise bad(call, "x", x, f"[{handle.rows} received rows, {hidden}]")
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
                                  (handle.tokens, hidden)) for i, b in enumerate(biases))
            return xs[:handle.rows], w, biases

        # Every rank combines on the current plan's operator (a handle of another is stale,
        # refused), which tells every rank each one's verdict and whether it passed weights, so
        # no rank goes on to the weights' combine alone.
        p = self.plan
        try:
            xs, w, biases = check()
        except Exception:
            if p is not None:
                nothing = np.empty(0, np.int32)
                try:
                    p.x.operator.combine(False, nothing, nothing, nothing, nothing, nothing, 0,
                                         nothing, verdict=_REFUSE)
                except shmoe.Error:
                    pass
            raise
        mode = int(w is not None)
        rows = xs.view(torch.int16).numpy()
        hidden = handle.hidden
        op = p.combine_buffer(hidden)
        if biases:
            # DeepEP adds the bias to the float32 sum and rounds once.
            summed = Normal._reduce(op, handle, rows, hidden, mode, sums=True)
            for b in biases:
                summed += b.to(torch.float32)
            combined = summed.to(torch.bfloat16)
        else:
            combined = Normal._reduce(op, handle, rows, hidden, mode).view(torch.bfloat16)
        combined_w = None
        if w is not None:
            combined_w = Normal._reduce(p.float32_weights(), handle, w.numpy(), handle.num_topk,
                                        mode)
        return combined, combined_w

    @staticmethod
    def _reduce(buf: shmoe.MoeBuffer, h: Handle, rows: np.ndarray, width: int, mode: int,
                sums: bool = False) -> torch.Tensor:
        """buf's combine of `rows` on h's routing with weight 1: [tokens, width] of buf's
        dtype in a host block of its pool, or with `sums` the float32 sums in a fresh array;
        `mode`: whether topk_weights was given, which every rank must pass alike."""
        if sums:
            out = np.empty(h.tokens * width, np.float32)
        else:
            dtype = np.float32 if buf.dtype == "float32" else np.int16
            out = _host_array(buf.operator.take_token_rows(), dtype)[:h.tokens * width]
        try:
            buf.operator.combine(False, rows, h.assist, h.ep_recv, h.routes,
                                 h.plan.ones[:h.tokens], h.tokens, out, combined_x_float32=sums,
                                 caller_mode=mode)
        except shmoe.Error as e:
            if "caller_mode" not in str(e):
                raise
            raise ValueError("deep_ep.Buffer.combine: topk_weights given on some ranks and not "
                             f"on others (on this rank: {'given' if mode else 'None'}): give it "
                             "on every rank or on none") from e
        return torch.from_numpy(out.reshape(h.tokens, width))
