"""Shrink mode's low-latency calls (still in Python; normal low-latency mode is
low_latency.py over _shmoe.LowLatencyBuffer). DeepEP's low-latency mode on shmoe: dispatch into the
expert-major layout
[local experts, num_max_dispatch_tokens_per_rank x ranks, hidden] and the weighted combine back.

Both run on shmoe's MoE dispatch and combine with the real experts (expert e on rank
e // local experts). shmoe lands each rank's rows grouped by local expert, then source rank, then
token; the receive step copies each expert's run of rows into its slab of the result, so rows
from rank j form one range, as `layout_range` says. An FP8 dispatch sends DeepEP's message rows
(hidden E4M3 codes, then hidden / 128 float32 scales, from shmoe_fp8_quantize_token_rows) and
the receive step splits them into a torch.float8_e4m3fn result (by way of bfloat16 rows, which
hold every E4M3 value exactly) and its float32 scales, as DeepEP returns them. The combine always carries BF16 rows (use_logfmt is
accepted: its 10-bit format saves RDMA bandwidth, which shared memory does not need, and BF16 is
at least as accurate), summed with the weights in float32 and rounded once to bfloat16.
Shrink mode (shrink.py) runs the same steps through shrink-mode operators, with the changes
marked where they are."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import torch

import shmoe
import shmoe.moe
from shmoe import _shmoe
from shmoe._runtime import agreed

from .checks import bad, check_range, positive_int, tensor
from .shrink import Shrink, agreed_hints, area_topk
from .utils import EventHandle, EventOverlap

_BLOCK = 128  # channels per FP8 scale
_DISPATCH = "deep_ep::internode_ll::dispatch"
_COMBINE = "deep_ep::internode_ll::combine"
FP8_DTYPE = torch.float8_e4m3fn


def fp8_row_bytes(hidden: int) -> int:
    """Bytes of one FP8 message row: hidden codes, then hidden / 128 float32 scales."""
    return hidden + hidden // _BLOCK * 4


def size_hint(max_tokens: int, hidden: int, num_ranks: int, num_experts: int) -> int:
    """Symmetric bytes the low-latency areas of one shape take on a rank: the receive windows
    (every local expert's rows from every rank, in BF16 and in FP8) and the combine window
    (every token's rows, up to 32 experts each), rounded up to 4 KiB."""
    rows = num_experts * max_tokens  # local experts x ranks x tokens
    total = rows * (2 * hidden + fp8_row_bytes(hidden)) + max_tokens * min(num_experts, 32) \
        * 2 * hidden
    return (total + 4095) // 4096 * 4096


class Shape(NamedTuple):
    max_tokens: int  # num_max_dispatch_tokens_per_rank
    hidden: int
    num_experts: int
    num_topk: int


class LowLatencyHandle(tuple):
    """DeepEP's handle (src_info, layout_range, num_max_dispatch_tokens_per_rank, hidden,
    num_experts), with what combine needs of the shmoe dispatch."""

    areas: "_Areas"
    dispatch_handle: shmoe.moe.DispatchHandle
    num_tokens: int
    num_topk: int  # the call's (shrink mode's areas may hold more, padded with -1)
    counts: List[int]  # rows each local expert received


class _Areas:
    """The shmoe buffers of one shape (BF16 for dispatch and combine; FP8 message rows, made at
    the first FP8 dispatch) and the results, two of each kind taken in turn as DeepEP's double
    buffer is (a result is valid until the second dispatch after it)."""

    def __init__(self, shape: Shape, num_ranks: int, shrink_ms: int = 0) -> None:
        self.shape = shape
        self.num_ranks = num_ranks
        self.shrink_ms = shrink_ms
        self.local_experts = shape.num_experts // num_ranks
        self.slots = shape.max_tokens * num_ranks
        # A local expert gets at most one row per token of each rank.
        self.max_rows = min(self.local_experts, shape.num_topk) * self.slots
        self.bf16 = self._buffer(shape.hidden, "bfloat16")
        self.fp8: Optional[shmoe.MoeBuffer] = None
        self.fp8_rows: Optional[np.ndarray] = None
        self._results: Dict[Any, List[torch.Tensor]] = {}
        self._turn = 0
        self.combine_input: Optional[torch.Tensor] = None
        rows = self.bf16.recv_capacity
        window = self.bf16.receive_window.view(np.int16)[: rows * shape.hidden]
        self.bf16_window = torch.from_numpy(window).view(torch.bfloat16).view(rows, shape.hidden)
        # Shrink mode: FP8 message rows travel inside BF16 rows through the one operator (its
        # combine must follow its own dispatch), and combine's rows are made compact here, as
        # dispatch's layout (the window holds fixed slots then); both made at first use.
        self.wide_rows: Optional[np.ndarray] = None
        self.compact: Optional[torch.Tensor] = None

    def _buffer(self, hidden: int, dtype: str) -> shmoe.MoeBuffer:
        s = self.shape
        if self.shrink_ms:  # a fixed slot per (local expert, source, token): no row limit
            return shmoe.MoeBuffer(s.max_tokens, hidden, s.num_experts, s.num_topk, dtype,
                                    shrink_timeout_ms=self.shrink_ms)
        return shmoe.MoeBuffer(s.max_tokens, hidden, s.num_experts, s.num_topk, dtype,
                                max_recv_rows=self.max_rows)

    def fp8_buffer(self) -> shmoe.MoeBuffer:
        if self.fp8 is None:
            self.fp8 = self._buffer(fp8_row_bytes(self.shape.hidden) // 4, "int32")
        return self.fp8

    def fp8_message_rows(self) -> np.ndarray:
        """uint8 [max tokens, FP8 row bytes]: where a dispatch quantizes its tokens."""
        if self.fp8_rows is None:
            self.fp8_rows = np.empty((self.shape.max_tokens, fp8_row_bytes(self.shape.hidden)),
                                     np.uint8)
        return self.fp8_rows

    def fp8_in_bf16_rows(self, tokens: int) -> np.ndarray:
        """Shrink mode: this call's FP8 message rows (fp8_rows) as the first bytes of BF16 rows
        (bit patterns, uint16 [tokens, hidden]; an FP8 row is never longer)."""
        s = self.shape
        if self.wide_rows is None:
            self.wide_rows = np.zeros((s.max_tokens, s.hidden), np.uint16)
        row = fp8_row_bytes(s.hidden)
        self.wide_rows.view(np.uint8)[:tokens, :row] = self.fp8_message_rows()[:tokens]
        return self.wide_rows[:tokens]

    def compact_rows(self, ys: torch.Tensor, counts: List[int]) -> torch.Tensor:
        """Shrink mode: each local expert's rows of ys, one run after another (dispatch's
        layout), in a tensor of this area's (not the receive window)."""
        if self.compact is None:
            self.compact = torch.empty((self.bf16.recv_capacity, self.shape.hidden),
                                       dtype=torch.bfloat16)
        start = 0
        for e, count in enumerate(counts):
            self.compact[start:start + count].copy_(ys[e, :count])
            start += count
        return self.compact[:start]

    def result(self, kind: Any, shape: Tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """This turn's result tensor of `kind` (made once, then reused every second turn)."""
        pair = self._results.setdefault(kind, [])
        while len(pair) < 2:
            pair.append(torch.empty(shape, dtype=dtype))
        return pair[self._turn]

    def next_turn(self) -> None:
        self._turn ^= 1

    def close(self, abandon: bool = False) -> None:
        for buf in (self.fp8, self.bf16):
            if buf is not None:
                buf.abandon() if abandon else buf.close()


class LowLatency:
    """The low-latency half of a deep_ep.Buffer over `num_ranks` ranks; in shrink mode (with
    `shrink`) the operators of every shape asked of the size hint are made now."""

    def __init__(self, num_ranks: int, shrink: Optional[Shrink] = None) -> None:
        self.num_ranks = num_ranks
        self.shrink = shrink
        self.areas: Dict[Shape, _Areas] = {}
        if shrink is not None:
            for m, h, e in agreed_hints("deep_ep.Buffer", num_ranks):
                self._areas(Shape(m, h, e, area_topk(e, 1)))

    def close(self) -> None:
        """Frees the areas, collectively; in shrink mode gives them up on this rank alone."""
        for a in self.areas.values():
            a.close(abandon=self.shrink is not None)
        self.areas.clear()
        if self.shrink is not None:
            self.shrink.abandon()

    def _areas_of(self, call: str, handle: Any) -> _Areas:
        """The areas of the low_latency_dispatch of this buffer that returned `handle`."""
        if not isinstance(handle, LowLatencyHandle) or handle.areas not in self.areas.values():
            raise bad(call, "handle", handle, "the handle a low_latency_dispatch of this buffer "
                      "returned")
        return handle.areas

    def _areas(self, shape: Shape, call: str = "") -> _Areas:
        if shape not in self.areas:
            ms = 0
            if self.shrink is not None:
                ms = self.shrink.timeout_ms
                if self.shrink.any_masked():
                    masked = self.shrink.mask.nonzero().view(-1).tolist()
                    raise RuntimeError(
                        f"{call}: shrink mode: the operators of num_max_dispatch_tokens_per_rank="
                        f"{shape.max_tokens}, hidden={shape.hidden}, num_experts="
                        f"{shape.num_experts}, num_topk={shape.num_topk} do not exist, and are "
                        f"made with every rank, but ranks {masked} are masked: ask "
                        "get_low_latency_rdma_size_hint about the shape before making the "
                        "Buffer, or use it first while every rank is live")
            self.areas[shape] = _Areas(shape, self.num_ranks, ms)
        return self.areas[shape]

    # ---- Dispatch ---------------------------------------------------------------------------

    def dispatch(self, x, topk_idx, num_max_dispatch_tokens_per_rank, num_experts,
                 cumulative_local_expert_recv_stats=None, dispatch_wait_recv_cost_stats=None,
                 use_fp8=True, round_scale=False, use_ue8m0=False, async_finish=False,
                 return_recv_hook=False):
        call = "deep_ep.Buffer.low_latency_dispatch"
        n = self.num_ranks

        def check():
            max_tokens = positive_int(call, "num_max_dispatch_tokens_per_rank",
                                      num_max_dispatch_tokens_per_rank)
            experts = positive_int(call, "num_experts", num_experts)
            if experts % n:
                raise ValueError(f"{call}: num_experts={experts} is not divisible by the {n} "
                                 "ranks")
            xs = tensor(call, "x", x, torch.bfloat16, (None, None))
            tokens, hidden = xs.shape
            if tokens > max_tokens:
                raise bad(call, "x", x, f"[tokens, hidden] with tokens at most "
                          f"num_max_dispatch_tokens_per_rank={max_tokens}")
            if hidden < _BLOCK or hidden % _BLOCK:
                raise bad(call, "x", x, "[tokens, hidden] with hidden a positive multiple of 128")
            idx = tensor(call, "topk_idx", topk_idx, torch.int64, (tokens, None))
            if idx.shape[1] < 1 or idx.shape[1] > experts:
                raise bad(call, "topk_idx", topk_idx, f"[{tokens}, top-k] with top-k in "
                          f"1..{experts}")
            check_range(call, "topk_idx", idx, experts)
            if use_ue8m0 and not (use_fp8 and round_scale):
                raise ValueError(f"{call}: use_ue8m0=True needs use_fp8=True and "
                                 "round_scale=True (UE8M0 scales are powers of two)")
            local = experts // n
            stats = None
            if cumulative_local_expert_recv_stats is not None:
                stats = cumulative_local_expert_recv_stats
                tensor(call, "cumulative_local_expert_recv_stats", stats, torch.int32, (local,))
            if dispatch_wait_recv_cost_stats is not None:
                tensor(call, "dispatch_wait_recv_cost_stats", dispatch_wait_recv_cost_stats,
                       torch.int64, (n,))
            return Shape(max_tokens, hidden, experts, idx.shape[1]), xs, idx, stats

        shrink = self.shrink
        if shrink is None:
            shape, xs, idx, stats = agreed(call, check, lambda c: [
                ("num_max_dispatch_tokens_per_rank", c[0].max_tokens), ("hidden", c[0].hidden),
                ("num_experts", c[0].num_experts), ("num_topk", c[0].num_topk),
                ("use_fp8", int(bool(use_fp8)))])
        else:  # shrink mode: each rank checks its own (see shrink.py)
            shape, xs, idx, stats = check()
            k = area_topk(shape.num_experts, shape.num_topk)
            shape = shape._replace(num_topk=k)
            idx = torch.nn.functional.pad(idx, (0, k - idx.shape[1]), value=-1)
        num_topk = topk_idx.shape[1]
        areas = self._areas(shape, call)
        tokens = xs.shape[0]
        with torch.profiler.record_function(_DISPATCH):
            buf: shmoe.MoeBuffer = areas.bf16
            payload: Any = xs
            if use_fp8:
                if shrink is None:
                    buf = areas.fp8_buffer()
                rows = areas.fp8_message_rows()
                _shmoe.quantize_fp8_token_rows(xs.view(torch.int16).numpy(), tokens,
                                               shape.hidden, bool(round_scale), rows)
                payload = rows[:tokens].view(np.int32) if shrink is None \
                    else areas.fp8_in_bf16_rows(tokens)
            if shrink is None:
                recv, _, _, counts, handle = buf.dispatch(payload, idx, None, zero_copy=True)
            else:
                recv, _, _, counts, handle = buf.dispatch(payload, idx, None,
                                                          pe_mask=shrink.mask_np)
        _add_waits(dispatch_wait_recv_cost_stats, buf)
        received = _Received(areas, recv, counts, handle, bool(use_fp8), bool(use_ue8m0), stats)
        areas.next_turn()
        result = received.result
        h = LowLatencyHandle((received.src_info, received.layout_range, shape.max_tokens,
                              shape.hidden, shape.num_experts))
        h.areas, h.dispatch_handle, h.num_tokens, h.counts = areas, handle, xs.shape[0], counts
        h.num_topk = num_topk
        hook: Optional[Callable[[], None]] = None
        if return_recv_hook:
            hook = received.complete
        else:
            received.complete()
        return result, received.recv_count, h, EventOverlap(EventHandle()), hook

    # ---- Combine ----------------------------------------------------------------------------

    def combine(self, x, topk_idx, topk_weights, handle, use_logfmt=False, zero_copy=False,
                async_finish=False, return_recv_hook=False, out=None,
                combine_wait_recv_cost_stats=None):
        call = "deep_ep.Buffer.low_latency_combine"
        n = self.num_ranks

        def check():
            a = self._areas_of(call, handle)
            s = a.shape
            tokens = handle.num_tokens
            source = x
            if zero_copy:
                if a.combine_input is None:
                    raise ValueError(f"{call}: zero_copy=True, but "
                                     "get_next_low_latency_combine_buffer was not called")
                source = a.combine_input
            ys = tensor(call, "x", source, torch.bfloat16, (a.local_experts, a.slots, s.hidden))
            tensor(call, "topk_idx", topk_idx, torch.int64, (tokens, handle.num_topk))
            w = tensor(call, "topk_weights", topk_weights, torch.float32,
                       (tokens, handle.num_topk))
            if out is not None:
                tensor(call, "out", out, torch.bfloat16, (tokens, s.hidden))
            if combine_wait_recv_cost_stats is not None:
                tensor(call, "combine_wait_recv_cost_stats", combine_wait_recv_cost_stats,
                       torch.int64, (n,))
            return a, ys, w

        shrink = self.shrink
        areas, ys, w = agreed(call, check) if shrink is None else check()
        dh = handle.dispatch_handle
        with torch.profiler.record_function(_COMBINE):
            if shrink is not None:
                # Shrink mode: the rows in dispatch's layout, off the window (which holds fixed
                # slots); the weights padded as the routing was (zeros where it has -1).
                k = areas.shape.num_topk
                padded = torch.nn.functional.pad(w, (0, k - w.shape[1]))
                combined = areas.bf16.combine(areas.compact_rows(ys, handle.counts), dh, padded,
                                              pe_mask=shrink.mask_np)
            else:
                # The experts' rows go back into the BF16 receive window in dispatch's order;
                # when every rank does so, each rank's reduction reads them where they lie.
                rows = dh.num_recv_rows
                window = areas.bf16_window
                start = 0
                for e, count in enumerate(handle.counts):
                    window[start:start + count].copy_(ys[e, :count])
                    start += count
                combined = areas.bf16.combine(window[:rows], dh, w)
        _add_waits(combine_wait_recv_cost_stats, areas.bf16)
        done = _CombineResult(combined, out)
        hook: Optional[Callable[[], None]] = None
        if return_recv_hook:
            hook = done.complete
        else:
            done.complete()
        return done.out, EventOverlap(EventHandle()), hook

    def next_combine_buffer(self, handle) -> torch.Tensor:
        a = self._areas_of("deep_ep.Buffer.get_next_low_latency_combine_buffer", handle)
        if a.combine_input is None:
            a.combine_input = torch.empty((a.local_experts, a.slots, a.shape.hidden),
                                          dtype=torch.bfloat16)
        return a.combine_input

    def clean(self, num_max_dispatch_tokens_per_rank, hidden, num_experts) -> None:
        """Nothing to zero: shmoe's operators keep no flags in the areas between calls. The
        arguments are still checked, collectively; in shrink mode locally, and the call is a
        barrier of the live ranks that masks those that miss the bound."""
        call = "deep_ep.Buffer.clean_low_latency_buffer"

        def check():
            m = positive_int(call, "num_max_dispatch_tokens_per_rank",
                             num_max_dispatch_tokens_per_rank)
            h = positive_int(call, "hidden", hidden)
            e = positive_int(call, "num_experts", num_experts)
            if e % self.num_ranks:
                raise ValueError(f"{call}: num_experts={e} is not divisible by the "
                                 f"{self.num_ranks} ranks")
            return m, h, e

        if self.shrink is not None:
            check()
            self.shrink.barrier([buf for a in self.areas.values() for buf in (a.bf16, a.fp8)
                                 if buf is not None])
            return
        agreed(call, check, lambda c: [("num_max_dispatch_tokens_per_rank", c[0]),
                                       ("hidden", c[1]), ("num_experts", c[2])])


class _Received:
    """One dispatch's rows, as they landed, and the step that completes the receive: each local
    expert's rows copied (FP8: split into values and scales) into its slab of the result."""

    def __init__(self, areas: _Areas, recv: Any, counts: List[int],
                 handle: shmoe.moe.DispatchHandle, fp8: bool, ue8m0: bool,
                 stats: Optional[torch.Tensor]) -> None:
        self.areas, self.recv, self.counts, self.handle = areas, recv, counts, handle
        self.fp8, self.ue8m0, self.stats = fp8, ue8m0, stats
        s, L, slots, n = areas.shape, areas.local_experts, areas.slots, areas.num_ranks
        self.values = areas.result(("x", fp8), (L, slots, s.hidden), torch.bfloat16)
        self.scales: Optional[torch.Tensor] = None
        self.packed_scales: Optional[torch.Tensor] = None
        self.fp8_values: Optional[torch.Tensor] = None
        self.result: Any = self.values
        if fp8:
            self.scales = areas.result("scales", (L, slots, s.hidden // _BLOCK), torch.float32)
            if ue8m0:
                self.packed_scales = areas.result("ue8m0", (L, slots, -(-s.hidden // 512)),
                                                  torch.int32)
            self.fp8_values = areas.result("fp8", (L, slots, s.hidden), FP8_DTYPE)
            self.result = (self.fp8_values,
                           self.scales if self.packed_scales is None else self.packed_scales)
        self.recv_count = torch.tensor(counts, dtype=torch.int32)
        # Which rows of each expert came from which rank: (begin << 32) | count, begin counted
        # from the expert's first row.
        prefix = torch.from_numpy(handle.layout_prefix.astype(np.int64))
        per_rank = torch.diff(prefix, prepend=torch.zeros(1, dtype=torch.int64)).view(L, n)
        self.layout_range = ((torch.cumsum(per_rank, dim=1) - per_rank) << 32) | per_rank
        self.src_info = torch.full((L, slots), -1, dtype=torch.int32)

    def complete(self) -> None:
        with torch.profiler.record_function(_DISPATCH):
            s = self.areas.shape
            info = torch.from_numpy(self.handle.src_info[:, 1])
            start = 0
            for e, count in enumerate(self.counts):
                if count:
                    rows = slice(start, start + count)
                    self.src_info[e, :count] = info[rows]
                    if self.fp8:
                        # (In shrink mode each message row is the head of a BF16 row.)
                        message = np.ascontiguousarray(
                            self.recv.view(np.uint8)[rows, :fp8_row_bytes(s.hidden)])
                        _shmoe.unpack_fp8_token_rows(
                            message, count, s.hidden,
                            self.values[e].view(torch.int16).numpy(),
                            self.scales[e].numpy())  # type: ignore[index]
                    else:
                        self.values[e, :count].copy_(self.recv[rows])
                start += count
            if self.packed_scales is not None:
                _pack_ue8m0(self.scales, self.packed_scales, self.counts)  # type: ignore[arg-type]
            if self.fp8_values is not None:
                for e, count in enumerate(self.counts):
                    self.fp8_values[e, :count].copy_(self.values[e, :count])
            if self.stats is not None:
                self.stats += self.recv_count


def _add_waits(stats: Optional[torch.Tensor], buf: shmoe.MoeBuffer) -> None:
    """Adds to a *_wait_recv_cost_stats tensor, [num_ranks] int64, the nanoseconds the call
    waited on this rank for each rank (DeepEP counts GPU cycles). In shrink mode nothing comes
    before the operator's own steps, so a late rank shows there; otherwise each call first agrees
    on its arguments, a reduction where most of a late rank's delay is spent unseen."""
    if stats is not None:
        waits = torch.from_numpy(buf.last_source_waits() * 1000.0)
        stats += waits.round().to(torch.int64)


def _pack_ue8m0(scales: torch.Tensor, packed: torch.Tensor, counts: List[int]) -> None:
    """Power-of-two float32 scales -> their exponent bytes (UE8M0), four to an int32, the first
    in the lowest byte (little-endian, as DeepEP packs them)."""
    blocks = scales.shape[2]
    for e, count in enumerate(counts):
        if not count:
            continue
        exps = (scales[e, :count].view(torch.int32) >> 23).to(torch.uint8)
        padded = torch.zeros((count, packed.shape[2] * 4), dtype=torch.uint8)
        padded[:, :blocks] = exps
        packed[e, :count] = padded.view(torch.int32)


class _CombineResult:
    """A combine's reduced rows, delivered into `out` (when given) by the receive step."""

    def __init__(self, combined: torch.Tensor, out: Optional[torch.Tensor]) -> None:
        self.combined = combined
        self.out = combined if out is None else out

    def complete(self) -> None:
        with torch.profiler.record_function(_COMBINE):
            if self.out is not self.combined:
                self.out.copy_(self.combined)
