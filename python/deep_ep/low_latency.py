"""DeepEP's low-latency mode on shmoe.

The runtime is shmoe's LowLatencyBuffer (shmoe/deep_ep.h, bound as _shmoe.LowLatencyBuffer), which
checks every argument on every rank, keeps each shape's operators, packs FP8 and does the work;
each method here converts torch tensors to arrays and back and makes one runtime call. The
receive step is part of the call, so a return_recv_hook's hook has nothing left to do. Shrink mode
(shrink.py) is the runtime's too."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import torch

from shmoe import _shmoe

from .elastic import _tensor, _tensors
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


class LowLatencyHandle(tuple):
    """DeepEP's handle (src_info, layout_range, num_max_dispatch_tokens_per_rank, hidden,
    num_experts), with the runtime's result, whose record of the routing combine uses."""

    result: Any


def _result(handle: Any) -> Any:
    """What the runtime takes as the handle: the result of a LowLatencyHandle, anything else as
    it is (the runtime refuses it, naming handle)."""
    return getattr(handle, "result", handle) if isinstance(handle, LowLatencyHandle) else handle


def _done() -> None:
    """A return_recv_hook's hook: the call has received already."""


class LowLatency:
    """The low-latency half of a deep_ep.Buffer; in shrink mode (shrink_timeout_ms > 0) the
    runtime makes the operators of the `hinted` shapes now, collectively."""

    def __init__(self, shrink_timeout_ms: int = 0,
                 hinted: Optional[List[Tuple[int, int, int, int]]] = None) -> None:
        self.shrink = shrink_timeout_ms > 0
        self.runtime: Any = _shmoe.LowLatencyBuffer(shrink_timeout_ms, hinted or [])

    def close(self) -> None:
        """Frees the operators, collectively; in shrink mode gives them up on this rank alone."""
        if self.runtime is not None:
            self.runtime.abandon() if self.shrink else self.runtime.destroy()
            self.runtime = None

    def query_mask(self, mask_status) -> None:
        self.runtime.query_mask(_tensors(mask_status=mask_status))

    def dispatch(self, x, topk_idx, num_max_dispatch_tokens_per_rank, num_experts,
                 cumulative_local_expert_recv_stats=None, dispatch_wait_recv_cost_stats=None,
                 use_fp8=True, round_scale=False, use_ue8m0=False, async_finish=False,
                 return_recv_hook=False):
        with torch.profiler.record_function(_DISPATCH):
            arrays, result = self.runtime.dispatch(
                _tensors(x=x, topk_idx=topk_idx,
                         cumulative_local_expert_recv_stats=cumulative_local_expert_recv_stats,
                         dispatch_wait_recv_cost_stats=dispatch_wait_recv_cost_stats),
                num_max_dispatch_tokens_per_rank, num_experts, bool(use_fp8), bool(round_scale),
                bool(use_ue8m0))
        recv: Any = _tensor(arrays["recv_x"], FP8_DTYPE if use_fp8 else torch.bfloat16)
        if use_fp8:
            recv = (recv, torch.from_numpy(arrays["recv_x_scales"]))
        handle = LowLatencyHandle((torch.from_numpy(arrays["src_info"]),
                                   torch.from_numpy(arrays["layout_range"]),
                                   num_max_dispatch_tokens_per_rank, x.shape[1], num_experts))
        handle.result = result
        hook: Optional[Callable[[], None]] = _done if return_recv_hook else None
        return (recv, torch.from_numpy(arrays["recv_count"]), handle,
                EventOverlap(EventHandle()), hook)

    def combine(self, x, topk_idx, topk_weights, handle, use_logfmt=False, zero_copy=False,
                async_finish=False, return_recv_hook=False, out=None,
                combine_wait_recv_cost_stats=None):
        with torch.profiler.record_function(_COMBINE):
            arrays = self.runtime.combine(
                _tensors(x=None if zero_copy else x, topk_idx=topk_idx, topk_weights=topk_weights,
                         out=out, combine_wait_recv_cost_stats=combine_wait_recv_cost_stats),
                _result(handle), bool(zero_copy), bool(use_logfmt))
        combined = out if out is not None else _tensor(arrays["combined_x"], torch.bfloat16)
        hook: Optional[Callable[[], None]] = _done if return_recv_hook else None
        return combined, EventOverlap(EventHandle()), hook

    def next_combine_buffer(self, handle) -> torch.Tensor:
        return torch.from_numpy(self.runtime.next_combine_buffer(_result(handle))).view(
            torch.bfloat16)

    def clean(self, num_max_dispatch_tokens_per_rank, hidden, num_experts) -> None:
        """Nothing to zero: shmoe's operators keep no flags between calls. The arguments are
        checked and agreed on, collectively (shrink mode: a barrier of the live ranks)."""
        self.runtime.clean(num_max_dispatch_tokens_per_rank, hidden, num_experts)
