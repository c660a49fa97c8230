"""deep_ep.Buffer: DeepEP V1's expert-parallel communication buffer on CPU tensors over shmoe.

Normal mode maps DeepEP's intranode dispatch onto shmoe's MoE dispatch with one "expert" per
rank: a token goes to rank j when is_token_in_rank[t, j], so each rank receives one row per
(token, destination rank), ordered by source rank then token, as DeepEP's intranode kernels do.
The token's top-k indices and weights travel in a second, float32 dispatch with the same
routing (indices are small integers, exact in float32). Combine is shmoe's combine with weight 1
for every (token, rank): an unweighted sum over ranks, in float32, rounded once to bfloat16."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

import numpy as np
import torch
import torch.distributed as dist

import shmoe
import shmoe.moe
from shmoe._runtime import agreed

from . import _job
from . import low_latency
from .checks import bad, check_range, integer, tensor
from .config import Config
from .utils import EventHandle, EventOverlap

_MIN_HEAP = 512 << 20
_MAX_HEAP = 2 << 30


class _Handle(tuple):
    """DeepEP's 6-part handle (rank_prefix_matrix, channel_prefix_matrix,
    recv_channel_prefix_matrix, recv_src_idx, is_token_in_rank, send_head), with the shmoe
    dispatch handles that combine needs."""

    x_buffer: Any
    x_handle: Any
    meta_buffer: Any
    meta_handle: Any
    num_topk: int


class Buffer:
    """DeepEP's Buffer over the ranks of `group` (the whole torch.distributed job, gloo). The
    byte counts size shmoe's symmetric heap (SHMEM_SYMMETRIC_SIZE, when the environment does
    not set it: their sum, within 512 MiB..2 GiB); the NVLink/RDMA/QP options are accepted and
    have no effect on the CPU."""

    num_sms: int = 20

    def __init__(self, group: Optional["dist.ProcessGroup"], num_nvl_bytes: int = 0,
                 num_rdma_bytes: int = 0, low_latency_mode: bool = False,
                 num_qps_per_rank: int = 24, allow_nvlink_for_low_latency_mode: bool = True,
                 allow_mnnvl: bool = False, use_fabric: bool = False,
                 explicitly_destroy: bool = False, enable_shrink: bool = False,
                 comm: Any = None) -> None:
        call = "deep_ep.Buffer"
        if comm is not None:
            raise ValueError(f"{call}: comm (mpi4py) is not supported; pass a torch.distributed "
                             "group")
        if group is None:
            group = dist.group.WORLD
        self.group = group
        self.rank = dist.get_rank(group)
        self.group_size = dist.get_world_size(group)
        self.num_nvl_bytes = integer(call, "num_nvl_bytes", num_nvl_bytes)
        self.num_rdma_bytes = integer(call, "num_rdma_bytes", num_rdma_bytes)
        self.low_latency_mode = bool(low_latency_mode)
        self.explicitly_destroy = bool(explicitly_destroy)
        self.enable_shrink = bool(enable_shrink)
        heap = min(max(self.num_nvl_bytes + self.num_rdma_bytes, _MIN_HEAP), _MAX_HEAP)
        _job.join(group, heap)
        self._buffers: dict = {}  # (kind) -> (shmoe.moe.Buffer, token capacity)
        self._exchange: dict = {}  # row length -> (src, dest) symmetric int64 arrays
        self._low_latency = low_latency.LowLatency(self.group_size)
        self._destroyed = False

    # ---- Lifetime ---------------------------------------------------------------------------

    def destroy(self) -> None:
        """Frees the buffer's shmoe resources (collective) and ends shmoe on this process: a
        process runs one shmoe job, so no Buffer can be made after destroy()."""
        if self._destroyed:
            return
        self._destroyed = True
        self._low_latency.close()
        for buf, _ in self._buffers.values():
            buf.close()
        for src, dest in self._exchange.values():
            shmoe.free(dest)
            shmoe.free(src)
        self._buffers.clear()
        self._exchange.clear()
        shmoe.finalize()

    def _require_live(self, call: str) -> None:
        if self._destroyed:
            raise RuntimeError(f"{call}: the buffer has been destroyed")

    # ---- Static helpers ---------------------------------------------------------------------

    @staticmethod
    def is_sm90_compiled() -> bool:
        """False: no SM90 build here, so DeepEP's FP8 intranode paths are not taken."""
        return False

    @staticmethod
    def set_num_sms(new_num_sms: int) -> None:
        if isinstance(new_num_sms, bool) or not isinstance(new_num_sms, int) or new_num_sms < 2 \
                or new_num_sms % 2:
            raise ValueError(f"deep_ep.Buffer.set_num_sms: new_num_sms={new_num_sms!r} must be a "
                             "positive even int")
        Buffer.num_sms = new_num_sms

    @staticmethod
    def capture() -> EventOverlap:
        return EventOverlap(EventHandle())

    @staticmethod
    def get_low_latency_rdma_size_hint(num_max_dispatch_tokens_per_rank: int, hidden: int,
                                       num_ranks: int, num_experts: int) -> int:
        """Symmetric bytes the low-latency areas of this shape take on each rank."""
        return low_latency.size_hint(num_max_dispatch_tokens_per_rank, hidden, num_ranks,
                                     num_experts)

    @staticmethod
    def get_dispatch_config(num_ranks: int) -> Config:
        return Config(Buffer.num_sms, 6, 256, 6, 128)

    @staticmethod
    def get_combine_config(num_ranks: int) -> Config:
        return Config(Buffer.num_sms, 6, 256, 6, 128)

    # ---- Normal mode ------------------------------------------------------------------------

    def get_dispatch_layout(self, topk_idx: torch.Tensor, num_experts: int,
                            previous_event: Optional[EventOverlap] = None,
                            async_finish: bool = False, allocate_on_comm_stream: bool = False):
        """(num_tokens_per_rank int32 [ranks], None, num_tokens_per_expert int32 [experts],
        is_token_in_rank bool [tokens, ranks], event); local."""
        call = "deep_ep.Buffer.get_dispatch_layout"
        self._require_live(call)
        with torch.profiler.record_function("deep_ep::get_dispatch_layout"):
            n = self.group_size
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
            per_rank = in_rank.sum(dim=0, dtype=torch.int32)
        return per_rank, None, per_expert, in_rank, EventOverlap(EventHandle())

    def dispatch(self, x, handle=None, num_tokens_per_rank=None, num_tokens_per_rdma_rank=None,
                 is_token_in_rank=None, num_tokens_per_expert=None, topk_idx=None,
                 topk_weights=None, expert_alignment: int = 1, num_worst_tokens: int = 0,
                 config: Optional[Config] = None, previous_event=None, async_finish=False,
                 allocate_on_comm_stream=False):
        """DeepEP's dispatch (collective over the group): returns (recv_x, recv_topk_idx,
        recv_topk_weights, num_recv_tokens_per_expert_list, handle, event); with handle= (a
        cached dispatch) (recv_x, None, None, None, None, event)."""
        call = "deep_ep.Buffer.dispatch"
        self._require_live(call)
        with torch.profiler.record_function("deep_ep::dispatch"):
            if handle is not None:
                return self._cached_dispatch(call, x, handle, topk_idx, topk_weights)
            return self._dispatch(call, x, num_tokens_per_rank, is_token_in_rank,
                                  num_tokens_per_expert, topk_idx, topk_weights,
                                  expert_alignment, num_worst_tokens, config)

    def _dispatch(self, call, x, num_tokens_per_rank, is_token_in_rank, num_tokens_per_expert,
                  topk_idx, topk_weights, expert_alignment, num_worst_tokens, config):
        n, me = self.group_size, self.rank

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
                       ("with top-k", int(c[6] is not None)),
                       ("num_topk", 0 if c[6] is None else c[6].shape[1])])
        tokens, hidden = xs.shape
        experts = per_expert.shape[0]
        L = experts // n
        # Every rank's counts: [tokens to each rank (n), tokens per expert (E), tokens, worst].
        row = torch.cat([per_rank.to(torch.int64), per_expert.to(torch.int64),
                         torch.tensor([tokens, worst], dtype=torch.int64)])
        table = self._all_gather(row).reshape(n, n + experts + 2)
        sent = table[:, :n]  # sent[i, j]: tokens rank i sends to rank j
        rank_prefix_matrix = torch.cumsum(sent, dim=0).to(torch.int32)
        rows = [int(sent[:, j].sum()) for j in range(n)]
        worsts = table[:, n + experts + 1]
        for j in range(n):
            if worsts[j] and worsts[j] < rows[j]:
                raise ValueError(f"{call}: rank {j} passed num_worst_tokens={int(worsts[j])}, "
                                 f"fewer than the {rows[j]} tokens it receives")
        max_tokens = int(table[:, n + experts].max())
        routes = _routes(in_rank)
        xbuf = self._moe_buffer("x", max_tokens, hidden, "bfloat16")
        recv_x, _, _, _, xh = xbuf.dispatch(xs, routes)
        if recv_x.shape[0] != rows[me]:
            raise RuntimeError(f"{call}: received {recv_x.shape[0]} rows where "
                               f"num_tokens_per_rank of the ranks promise {rows[me]}")
        recv_topk_idx = recv_topk_weights = None
        mbuf = mh = None
        K = 0
        if idx is not None:
            K = idx.shape[1]
            mbuf = self._moe_buffer(("meta", K), max_tokens, 2 * K, "float32")
            meta = torch.cat([idx.to(torch.float32), w], dim=1)
            recv_meta, _, _, _, mh = mbuf.dispatch(meta, routes)
            got = recv_meta[:, :K].to(torch.int64)
            mine = (got >= me * L) & (got < (me + 1) * L)
            recv_topk_idx = torch.where(mine, got - me * L, torch.full_like(got, -1))
            recv_topk_weights = torch.where(mine, recv_meta[:, K:], torch.zeros_like(got,
                                            dtype=torch.float32))
        src_idx = torch.from_numpy(np.ascontiguousarray(xh.assist_info[:, 1])).to(torch.int32)
        send_head = torch.where(in_rank, torch.cumsum(in_rank.to(torch.int32), dim=0) - 1,
                                torch.full((tokens, n), -1, dtype=torch.int32)).to(torch.int32)
        h = _Handle((rank_prefix_matrix, sent[me].reshape(n, 1).to(torch.int32),
                     sent[:, me].reshape(n, 1).to(torch.int32), src_idx, in_rank, send_head))
        h.x_buffer, h.x_handle, h.meta_buffer, h.meta_handle, h.num_topk = xbuf, xh, mbuf, mh, K
        received = table[:, n + me * L:n + (me + 1) * L].sum(dim=0)
        counts = [int(-(-int(c) // align) * align) for c in received]
        if worsts[me]:
            pad = int(worsts[me]) - rows[me]
            recv_x = torch.cat([recv_x, torch.zeros((pad, hidden), dtype=torch.bfloat16)])
            if recv_topk_idx is not None:
                recv_topk_idx = torch.cat([recv_topk_idx,
                                           torch.full((pad, K), -1, dtype=torch.int64)])
                recv_topk_weights = torch.cat([recv_topk_weights,
                                               torch.zeros((pad, K), dtype=torch.float32)])
            counts = []
        return recv_x, recv_topk_idx, recv_topk_weights, counts, h, EventOverlap(EventHandle())

    def _cached_dispatch(self, call, x, handle, topk_idx, topk_weights):
        def check():
            if not isinstance(handle, _Handle):
                raise bad(call, "handle", handle, "the handle a dispatch of this buffer returned")
            if topk_idx is not None or topk_weights is not None:
                raise ValueError(f"{call}: a cached dispatch (handle=) takes no topk_idx or "
                                 "topk_weights")
            if handle.x_buffer._closed:
                raise ValueError(f"{call}: handle is stale: the buffer has since grown or closed")
            in_rank = handle[4]
            return tensor(call, "x", x, torch.bfloat16, (in_rank.shape[0], handle.x_buffer.hidden))

        xs = agreed(call, check)
        recv_x, _, _, _, _ = handle.x_buffer.dispatch(xs, _routes(handle[4]))
        return recv_x, None, None, None, None, EventOverlap(EventHandle())

    def combine(self, x, handle, topk_weights=None, bias=None, config=None, previous_event=None,
                async_finish=False, allocate_on_comm_stream=False):
        """DeepEP's combine (collective): (combined_x [tokens, hidden] bfloat16, the summed
        topk_weights or None, event); each token's rows from every rank it went to, summed
        without weights, plus bias (0, 1 or 2 tensors of [tokens, hidden])."""
        call = "deep_ep.Buffer.combine"
        self._require_live(call)
        with torch.profiler.record_function("deep_ep::combine"):
            def check():
                if not isinstance(handle, _Handle):
                    raise bad(call, "handle", handle, "the handle a dispatch returned")
                xb, xh = handle.x_buffer, handle.x_handle
                if xb._closed:
                    raise ValueError(f"{call}: handle is stale: the buffer has since grown")
                rows, tokens = xh.num_recv_rows, xh.num_tokens
                xs = tensor(call, "x", x, torch.bfloat16, (None, xb.hidden))
                if xs.shape[0] < rows:
                    raise bad(call, "x", x, f"[{rows} received rows, {xb.hidden}]")
                w = None
                if topk_weights is not None:
                    if handle.meta_handle is None:
                        raise ValueError(f"{call}: topk_weights given, but the dispatch of "
                                         "handle carried no top-k")
                    w = tensor(call, "topk_weights", topk_weights, torch.float32,
                                (None, handle.num_topk))
                    if w.shape[0] < rows:
                        raise bad(call, "topk_weights", w, f"[{rows}, {handle.num_topk}]")
                    w = w[:rows]
                biases = bias if isinstance(bias, tuple) else (() if bias is None else (bias,))
                if len(biases) > 2:
                    raise ValueError(f"{call}: bias is at most two tensors, not {len(biases)}")
                biases = tuple(tensor(call, f"bias[{i}]", b, torch.bfloat16,
                                       (tokens, xb.hidden)) for i, b in enumerate(biases))
                return xs[:rows], w, biases

            xs, w, biases = agreed(call, check, lambda c: [
                ("with top-k weights", int(c[1] is not None)), ("bias tensors", len(c[2]))])
            n = self.group_size
            tokens = handle.x_handle.num_tokens
            ones = torch.ones((tokens, n), dtype=torch.float32)
            xb = handle.x_buffer
            if biases:
                # DeepEP adds the bias to the float32 sum and rounds once: the rows are summed
                # in a float32 buffer of the same routing, then rounded after the bias.
                wide = self._moe_buffer("x-float32", xb.max_tokens_per_pe, xb.hidden, "float32")
                total = wide.combine(xs.to(torch.float32), handle.x_handle, ones)
                for b in biases:
                    total += b.to(torch.float32)
                combined = total.to(torch.bfloat16)
            else:
                combined = xb.combine(xs.contiguous(), handle.x_handle, ones)
            combined_w = None
            if w is not None:
                K = handle.num_topk
                y = torch.cat([w, torch.zeros_like(w)], dim=1)
                combined_w = handle.meta_buffer.combine(y, handle.meta_handle, ones)[:, :K]
                combined_w = combined_w.contiguous()
        return combined, combined_w, EventOverlap(EventHandle())

    # ---- Low-latency mode (deep_ep/low_latency.py) ------------------------------------------

    def clean_low_latency_buffer(self, num_max_dispatch_tokens_per_rank: int, hidden: int,
                                 num_experts: int) -> None:
        self._require_live("deep_ep.Buffer.clean_low_latency_buffer")
        self._low_latency.clean(num_max_dispatch_tokens_per_rank, hidden, num_experts)

    def low_latency_dispatch(self, x: torch.Tensor, topk_idx: torch.Tensor,
                             num_max_dispatch_tokens_per_rank: int, num_experts: int,
                             cumulative_local_expert_recv_stats: Optional[torch.Tensor] = None,
                             dispatch_wait_recv_cost_stats: Optional[torch.Tensor] = None,
                             use_fp8: bool = True, round_scale: bool = False,
                             use_ue8m0: bool = False, async_finish: bool = False,
                             return_recv_hook: bool = False):
        """DeepEP's low-latency dispatch (collective): (recv_x, recv_count, handle, event,
        hook). recv_x is [local experts, num_max_dispatch_tokens_per_rank * ranks, hidden]
        bfloat16, or with use_fp8 (values, scales): values hold E4M3 values (float8_e4m3fn
        where torch has it, else bfloat16 of the same values), scales float32 [..., hidden /
        128], or with use_ue8m0 int32 [..., hidden / 512] of four packed exponent bytes. With
        return_recv_hook the rows are sent and hook() completes the receive."""
        self._require_live("deep_ep.Buffer.low_latency_dispatch")
        return self._low_latency.dispatch(
            x, topk_idx, num_max_dispatch_tokens_per_rank, num_experts,
            cumulative_local_expert_recv_stats, dispatch_wait_recv_cost_stats, use_fp8,
            round_scale, use_ue8m0, async_finish, return_recv_hook)

    def low_latency_combine(self, x: torch.Tensor, topk_idx: torch.Tensor,
                            topk_weights: torch.Tensor, handle: tuple, use_logfmt: bool = False,
                            zero_copy: bool = False, async_finish: bool = False,
                            return_recv_hook: bool = False, out: Optional[torch.Tensor] = None,
                            combine_wait_recv_cost_stats: Optional[torch.Tensor] = None):
        """DeepEP's low-latency combine (collective): (combined_x [tokens, hidden] bfloat16,
        event, hook), each token's expert outputs summed with topk_weights in float32."""
        self._require_live("deep_ep.Buffer.low_latency_combine")
        return self._low_latency.combine(x, topk_idx, topk_weights, handle, use_logfmt,
                                         zero_copy, async_finish, return_recv_hook, out,
                                         combine_wait_recv_cost_stats)

    def get_next_low_latency_combine_buffer(self, handle: object) -> torch.Tensor:
        """The [local experts, num_max_dispatch_tokens_per_rank * ranks, hidden] bfloat16
        tensor that a low_latency_combine with zero_copy=True takes its rows from."""
        self._require_live("deep_ep.Buffer.get_next_low_latency_combine_buffer")
        return self._low_latency.next_combine_buffer(handle)

    # ---- Internals --------------------------------------------------------------------------

    def _all_gather(self, row: torch.Tensor) -> torch.Tensor:
        """Every rank's int64 `row` (same length on every rank), in rank order (collective)."""
        length = row.shape[0]
        if length not in self._exchange:
            self._exchange[length] = (shmoe.zeros(length, "int64"),
                                      shmoe.zeros(length * self.group_size, "int64"))
        src, dest = self._exchange[length]
        src[:] = row.numpy()
        shmoe.fcollect(shmoe.team_world(), dest, src)
        return torch.from_numpy(dest.copy())

    def _moe_buffer(self, kind: Any, max_tokens: int, hidden: int, dtype: str):
        """The shmoe MoE buffer of `kind` (one "expert" per rank), grown to `max_tokens` tokens
        per rank (collective: every rank passes the same max_tokens, from the exchange)."""
        n = self.group_size
        have = self._buffers.get(kind)
        if have is not None and have[1] >= max_tokens and have[0].hidden == hidden:
            return have[0]
        if have is not None:
            have[0].close()
        capacity = 64
        while capacity < max_tokens:
            capacity *= 2
        buf = shmoe.moe.Buffer(capacity, hidden, n, n, dtype, max_recv_rows=n * capacity)
        self._buffers[kind] = (buf, capacity)
        return buf


def _routes(in_rank: torch.Tensor) -> torch.Tensor:
    """[tokens, ranks] int32: j in column j where the token goes to rank j, else -1."""
    n = in_rank.shape[1]
    ranks = torch.arange(n, dtype=torch.int32).expand(in_rank.shape[0], n)
    return torch.where(in_rank, ranks, torch.full_like(ranks, -1)).contiguous()
