"""deep_ep.Buffer: DeepEP V1's expert-parallel communication buffer on CPU tensors over shmoe.
The Buffer checks its lifetime and joins the job; normal mode lives in normal.py, low-latency
mode in low_latency.py, both on shmoe's MoE operators."""

from __future__ import annotations

import numbers
from typing import Any, Optional

import torch
import torch.distributed as dist

import shmoe

from . import _job, low_latency, normal, shrink
from .config import Config
from .utils import EventHandle, EventOverlap

_MIN_HEAP = 512 << 20
_MAX_HEAP = 2 << 30


def _byte_count(call: str, name: str, v: Any) -> int:
    """The Buffer's own byte counts and offsets (its bookkeeping, before any runtime exists)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
        raise ValueError(f"{call}: {name}={v!r} must be an int of at least 0")
    return int(v)


class Buffer:
    """DeepEP's Buffer over the ranks of `group` (a torch.distributed gloo group). The
    byte counts size shmoe's symmetric heap (SHMEM_SYMMETRIC_SIZE, when the environment does
    not set it: their sum, within 512 MiB..2 GiB); the NVLink/RDMA/QP options are accepted and
    have no effect on the CPU. enable_shrink: DeepEP's shrink mode for the low-latency calls,
    with the timeout SHMOE_SHRINK_TIMEOUT_MS (deep_ep/shrink.py says what it changes)."""

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
        world = dist.group.WORLD
        if group is None and world is None:
            raise RuntimeError(f"{call}: torch.distributed is not initialized")
        self.group: "dist.ProcessGroup" = group if group is not None else world  # type: ignore[assignment]
        self.rank = dist.get_rank(self.group)
        self.group_size = dist.get_world_size(self.group)
        self.num_nvl_bytes = _byte_count(call, "num_nvl_bytes", num_nvl_bytes)
        self.num_rdma_bytes = _byte_count(call, "num_rdma_bytes", num_rdma_bytes)
        self.low_latency_mode = bool(low_latency_mode)
        self.explicitly_destroy = bool(explicitly_destroy)
        self.enable_shrink = bool(enable_shrink)
        ms = shrink.timeout_ms(call) if self.enable_shrink else 0  # before anything collective
        heap = min(max(self.num_nvl_bytes + self.num_rdma_bytes, _MIN_HEAP), _MAX_HEAP)
        _job.join(self.group, heap)
        self._normal = normal.Normal()
        self._shrink = ms > 0
        self._low_latency = low_latency.LowLatency(ms, list(shrink.hinted) if ms else [])
        self._local_bytes: dict = {}
        self._destroyed = False

    # ---- Lifetime ---------------------------------------------------------------------------

    def destroy(self) -> None:
        """Frees the buffer's shmoe resources (collective) and ends shmoe on this process: a
        process runs one shmoe job, so no Buffer can be made after destroy(). In shrink mode
        nothing collective: this rank gives its operators up (their memory stays until the
        process ends) and shmoe ends at the process's exit (deep_ep/shrink.py)."""
        if self._destroyed:
            return
        self._destroyed = True
        self._low_latency.close()
        self._normal.close(abandon=self._shrink)
        if not self._shrink:
            shmoe.finalize()

    def _require_live(self, call: str) -> None:
        if self._destroyed:
            raise RuntimeError(f"{call}: the buffer has been destroyed")

    def get_local_buffer_tensor(self, dtype: torch.dtype, size: Optional[torch.Size] = None,
                                offset: int = 0, use_rdma_buffer: bool = False) -> torch.Tensor:
        """DeepEP's view of this rank's NVL (or, with use_rdma_buffer, RDMA) buffer as `dtype`
        from byte `offset` on, shaped `size` when given: here a CPU byte area of the Buffer's
        num_nvl_bytes (num_rdma_bytes), kept for the Buffer's life, so that every call sees the
        same memory. It is this rank's own memory; no other rank reads it."""
        call = "deep_ep.Buffer.get_local_buffer_tensor"
        self._require_live(call)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"{call}: dtype={dtype!r} must be a torch.dtype")
        total = self.num_rdma_bytes if use_rdma_buffer else self.num_nvl_bytes
        name = "num_rdma_bytes" if use_rdma_buffer else "num_nvl_bytes"
        offset = _byte_count(call, "offset", offset)
        item = torch.empty(0, dtype=dtype).element_size()
        if offset > total or offset % item:
            raise ValueError(f"{call}: offset={offset} must be a multiple of {item} (the size of "
                             f"{dtype}) in 0..{total} ({name})")
        area = self._local_bytes.get(name)
        if area is None:
            area = self._local_bytes[name] = torch.zeros(total, dtype=torch.uint8)
        whole = area[offset:offset + (total - offset) // item * item].view(dtype)
        if size is None:
            return whole
        shape = torch.Size(size)
        if shape.numel() > whole.numel():
            raise ValueError(f"{call}: size={list(shape)} needs {shape.numel()} elements of "
                             f"{dtype}; the {name}={total} buffer holds {whole.numel()} from "
                             f"offset {offset}")
        return whole[:shape.numel()].view(shape)

    # ---- Static helpers ---------------------------------------------------------------------

    @staticmethod
    def is_sm90_compiled() -> bool:
        """True: normal mode takes DeepEP's FP8 (values, scales) x, which callers (DeepEP's
        tests among them) offer only where this says the FP8 paths exist."""
        return True

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
        """Symmetric bytes the low-latency areas of this shape take on each rank. A shrink-mode
        Buffer made after this call makes the shape's areas up front (deep_ep/shrink.py)."""
        shrink.remember((num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts))
        return low_latency.size_hint(num_max_dispatch_tokens_per_rank, hidden, num_ranks,
                                     num_experts)

    @staticmethod
    def get_dispatch_config(num_ranks: int) -> Config:
        return Config(Buffer.num_sms, 6, 256, 6, 128)

    @staticmethod
    def get_combine_config(num_ranks: int) -> Config:
        return Config(Buffer.num_sms, 6, 256, 6, 128)

    # ---- Normal mode (deep_ep/normal.py) ----------------------------------------------------

    def get_dispatch_layout(self, topk_idx: torch.Tensor, num_experts: int,
                            previous_event: Optional[EventOverlap] = None,
                            async_finish: bool = False, allocate_on_comm_stream: bool = False):
        """(num_tokens_per_rank int32 [ranks], num_tokens_per_rdma_rank int32 [hosts] (None on
        one host), num_tokens_per_expert int32 [experts], is_token_in_rank bool [tokens, ranks],
        event); local."""
        self._require_live("deep_ep.Buffer.get_dispatch_layout")
        with torch.profiler.record_function("deep_ep::get_dispatch_layout"):
            layout = self._normal.layout(topk_idx, num_experts)
        return (*layout, EventOverlap(EventHandle()))

    def dispatch(self, x, handle=None, num_tokens_per_rank=None, num_tokens_per_rdma_rank=None,
                 is_token_in_rank=None, num_tokens_per_expert=None, topk_idx=None,
                 topk_weights=None, expert_alignment: int = 1, num_worst_tokens: int = 0,
                 config: Optional[Config] = None, previous_event=None, async_finish=False,
                 allocate_on_comm_stream=False):
        """DeepEP's dispatch (collective over the group): returns (recv_x, recv_topk_idx,
        recv_topk_weights, num_recv_tokens_per_expert_list, handle, event); with handle= (a
        cached dispatch) (recv_x, None, None, None, None, event)."""
        self._require_live("deep_ep.Buffer.dispatch")
        with torch.profiler.record_function("deep_ep::dispatch"):
            if handle is not None:
                recv_x = self._normal.cached_dispatch(x, handle, topk_idx, topk_weights)
                return recv_x, None, None, None, None, EventOverlap(EventHandle())
            out = self._normal.dispatch(x, num_tokens_per_rank, num_tokens_per_rdma_rank,
                                        is_token_in_rank, num_tokens_per_expert, topk_idx,
                                        topk_weights, expert_alignment, num_worst_tokens)
        return (*out, EventOverlap(EventHandle()))

    def combine(self, x, handle, topk_weights=None, bias=None, config=None, previous_event=None,
                async_finish=False, allocate_on_comm_stream=False):
        """DeepEP's combine (collective): (combined_x [tokens, hidden] bfloat16, the summed
        topk_weights or None, event); each token's rows from every rank it went to, summed
        without weights, plus bias (0, 1 or 2 tensors of [tokens, hidden])."""
        self._require_live("deep_ep.Buffer.combine")
        with torch.profiler.record_function("deep_ep::combine"):
            combined, combined_w = self._normal.combine(x, handle, topk_weights, bias)
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

    # ---- Shrink mode (deep_ep/shrink.py) ----------------------------------------------------

    def _shrink_mode(self, call: str) -> low_latency.LowLatency:
        self._require_live(call)
        if not self._shrink:
            raise RuntimeError(f"{call}: the buffer was made without enable_shrink=True")
        return self._low_latency

    def low_latency_update_mask_buffer(self, rank_to_mask: int, mask: bool = False) -> None:
        """Masks (mask=True) or unmasks a rank for the following low-latency calls: they neither
        send to it nor wait for it. A rank cannot mask itself. Unmasking a rank that was masked
        makes the next clean_low_latency_buffer a rejoin (deep_ep/shrink.py), which brings a rank
        that was away back."""
        call = "deep_ep.Buffer.low_latency_update_mask_buffer"
        self._shrink_mode(call).runtime.update_mask(rank_to_mask, bool(mask))

    def low_latency_query_mask_buffer(self, mask_status: torch.Tensor) -> None:
        """Writes each rank's mask (1 masked, 0 live) into mask_status, int32 [num_ranks]."""
        call = "deep_ep.Buffer.low_latency_query_mask_buffer"
        self._shrink_mode(call).query_mask(mask_status)

    def low_latency_clean_mask_buffer(self) -> None:
        """Unmasks every rank (a rank still absent is masked again at its next call's bound); on
        a rank that comes back, it makes the next clean_low_latency_buffer a rejoin."""
        self._shrink_mode("deep_ep.Buffer.low_latency_clean_mask_buffer").runtime.clean_mask()
