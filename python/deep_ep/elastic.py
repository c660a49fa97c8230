"""deep_ep.ElasticBuffer: DeepEP V2's expert-parallel buffer on CPU tensors over shmoe.

The runtime is shmoe's ElasticBuffer (shmoe/elastic.h, bound as _shmoe.ElasticBuffer), which
checks every argument, on every rank, and does the work; each method here converts torch tensors
to arrays and back and makes one runtime call. What DeepEP spends on a GPU's resources (SMs, QPs,
streams, events) is accepted and has no effect: on the CPU a call has completed when it returns.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

import torch
import torch.distributed as dist

import shmoe
from shmoe import _shmoe

from . import _job
from .elastic_primitives import ElasticPrimitives
from .utils import EventHandle, EventOverlap

_MIN_HEAP = 512 << 20
_MAX_HEAP = 8 << 30
# Profiler rows under DeepEP's kernel names (its tests time them): the runtime's call (which
# also unpacks the received rows out of the window), then the results' conversion to tensors.
_DISPATCH, _DISPATCH_EPILOGUE = "dispatch_impl", "dispatch_copy_epilogue_impl"
_COMBINE, _COMBINE_EPILOGUE = "combine_impl", "combine_reduce_epilogue_impl"
# The arrays' torch dtypes by the runtime's names for them.
_VIEWS = {torch.bfloat16: torch.int16, torch.float8_e4m3fn: torch.uint8}


def _array(t: Any) -> Tuple[Any, str]:
    """(a numpy view of t's memory, t's dtype name), for the runtime to check; anything that is
    not a tensor goes as it is, and the runtime refuses it naming the argument."""
    if not isinstance(t, torch.Tensor):
        return t, type(t).__name__
    t = t.detach().contiguous()
    name = str(t.dtype).removeprefix("torch.")
    return t.view(_VIEWS.get(t.dtype, t.dtype)).numpy(), name


def _tensors(**named: Any) -> Dict[str, Tuple[Any, str]]:
    return {k: _array(v) for k, v in named.items() if v is not None}


def _tensor(a: Any, dtype: torch.dtype) -> torch.Tensor:
    t = torch.from_numpy(a)
    return t.view(dtype) if dtype in _VIEWS else t


class EPHandle:
    """What a dispatch returns for a cached dispatch and for combine: DeepEP's EPHandle fields
    (shmoe/elastic.h says what each holds), with the runtime's own record of the routing."""

    def __init__(self, result: Any, arrays: Dict[str, Any], topk_idx: torch.Tensor,
                 do_expand: bool, num_experts: int, expert_alignment: int,
                 num_max_tokens_per_rank: int, num_sms: int) -> None:
        self.result = result
        self.do_expand = do_expand
        self.num_experts = num_experts
        self.expert_alignment = expert_alignment
        self.num_max_tokens_per_rank = num_max_tokens_per_rank
        self.num_sms = num_sms
        self.topk_idx = topk_idx
        get = lambda name: torch.from_numpy(arrays[name])  # noqa: E731
        self.psum_num_recv_tokens_per_scaleup_rank = get("psum_num_recv_tokens_per_scaleup_rank")
        self.psum_num_recv_tokens_per_expert = get("psum_num_recv_tokens_per_expert")
        self.num_unaligned_recv_tokens_per_expert = get("num_unaligned_recv_tokens_per_expert")
        self.num_recv_tokens_per_expert_list: List[int] = \
            arrays["num_recv_tokens_per_expert"].tolist()
        self.recv_src_metadata = get("recv_src_metadata")
        self.dst_buffer_slot_idx = get("dst_buffer_slot_idx")
        self.token_metadata_at_forward: Optional[torch.Tensor] = None
        self.channel_linked_list: Optional[torch.Tensor] = None
        self.num_recv_tokens = int(arrays["num_recv_tokens"])
        self.num_expanded_tokens = int(arrays["num_expanded_tokens"])


class ElasticBuffer(ElasticPrimitives):
    """DeepEP V2's ElasticBuffer: expert-parallel dispatch and combine, and (ElasticPrimitives)
    PP, AGRS sessions and Engram. The group's ranks are the shmoe job's PEs (deep_ep/_job.py);
    the scale-up domain is the PEs of one host, the scale-out domain the hosts."""

    def __init__(self, group: "dist.ProcessGroup", num_bytes: Optional[int] = None,
                 num_cpu_bytes: int = 0, num_max_tokens_per_rank: int = 0, hidden: int = 0,
                 num_topk: int = 0, use_fp8_dispatch: bool = False, deterministic: bool = False,
                 allow_hybrid_mode: bool = True, allow_multiple_reduction: bool = True,
                 prefer_overlap_with_compute: bool = True, sl_idx: int = 3,
                 num_allocated_qps: int = 0, num_cpu_timeout_secs: int = 300,
                 num_gpu_timeout_secs: int = 100, explicitly_destroy: bool = False) -> None:
        self.group = group
        self.rank_idx = group.rank()
        self.num_ranks = group.size()
        self.allow_hybrid_mode = bool(allow_hybrid_mode)
        self.allow_multiple_reduction = bool(allow_multiple_reduction)
        self.prefer_overlap_with_compute = bool(prefer_overlap_with_compute)
        self.deterministic = bool(deterministic)
        self.explicitly_destroy = bool(explicitly_destroy)
        self.num_max_tokens_per_rank = num_max_tokens_per_rank
        if num_bytes is None:
            num_bytes = self.get_buffer_size_hint(group, num_max_tokens_per_rank, hidden, num_topk,
                                                  use_fp8_dispatch)
        self.num_bytes = num_bytes
        # The buffer, a primitive's memory (PP, AGRS or Engram: at most num_bytes), and the
        # receive blocks (shmoe_elastic_buffer_heap_size).
        heap = int(_shmoe.ElasticBuffer.heap_size(self.num_ranks, int(num_bytes),
                                                  num_max_tokens_per_rank, hidden, num_topk,
                                                  bool(use_fp8_dispatch)))
        _job.join(group, min(max(heap, _MIN_HEAP), _MAX_HEAP))
        self.runtime: Any = _shmoe.ElasticBuffer(
            num_bytes, num_max_tokens_per_rank, hidden, num_topk, bool(use_fp8_dispatch),
            self.allow_hybrid_mode, self.allow_multiple_reduction, self.deterministic)
        self.num_allocated_qps = num_allocated_qps or (65 if self.allow_hybrid_mode else 17)
        self.num_scaleout_ranks, self.num_scaleup_ranks = self.get_logical_domain_size()
        self.scaleout_rank_idx = self.rank_idx // self.num_scaleup_ranks
        self.scaleup_rank_idx = self.rank_idx % self.num_scaleup_ranks
        self.num_rdma_ranks, self.num_nvlink_ranks = self.get_physical_domain_size()

    def destroy(self) -> None:
        """Frees the buffer (collective); the process's shmoe job goes on, so another
        ElasticBuffer may follow."""
        if self.runtime is not None:
            self.runtime.destroy()
            self.runtime = None

    # ---- Sizes and domains --------------------------------------------------------------------

    @staticmethod
    def get_buffer_size_hint(group: "dist.ProcessGroup", num_max_tokens_per_rank: int,
                             hidden: int, num_topk: int = 0, use_fp8_dispatch: bool = False,
                             allow_hybrid_mode: bool = True,
                             allow_multiple_reduction: bool = True) -> int:
        return int(_shmoe.ElasticBuffer.size_hint(group.size(), num_max_tokens_per_rank, hidden,
                                                  num_topk, bool(use_fp8_dispatch)))

    def get_physical_domain_size(self) -> Tuple[int, int]:
        return tuple(self.runtime.domain_size(False))  # type: ignore[return-value]

    def get_logical_domain_size(self) -> Tuple[int, int]:
        return tuple(self.runtime.domain_size(True))  # type: ignore[return-value]

    def get_theoretical_num_sms(self, num_experts: int, num_topk: int, *args: Any,
                                **kwargs: Any) -> int:
        """DeepEP sizes its kernels' SMs; a CPU call runs on the calling thread, so any positive
        count does, and this is the smallest DeepEP would give."""
        return 4

    def get_theoretical_num_qps(self, num_sms: int) -> int:
        return min(num_sms + 1, self.num_allocated_qps)

    # ---- Synchronization ----------------------------------------------------------------------

    def barrier(self, use_comm_stream: bool = True, with_cpu_sync: bool = False,
                sequential: bool = True) -> None:
        with torch.profiler.record_function("barrier"):  # DeepEP's kernel name: its tests time it
            shmoe.barrier_all()

    @staticmethod
    def capture() -> EventHandle:
        return EventHandle()

    def get_comm_stream(self) -> Any:
        return torch.cpu.current_stream()

    # ---- Dispatch and combine -----------------------------------------------------------------

    def dispatch(self, x: Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]],
                 topk_idx: Optional[torch.Tensor] = None,
                 topk_weights: Optional[torch.Tensor] = None,
                 cumulative_local_expert_recv_stats: Optional[torch.Tensor] = None,
                 num_experts: Optional[int] = None, num_max_tokens_per_rank: Optional[int] = None,
                 expert_alignment: Optional[int] = None, num_sms: int = 0, num_qps: int = 0,
                 previous_event: Optional[EventHandle] = None,
                 previous_event_before_epilogue: Optional[EventHandle] = None,
                 async_with_compute_stream: bool = False, allocate_on_comm_stream: bool = False,
                 handle: Optional[EPHandle] = None, do_handle_copy: bool = True,
                 do_cpu_sync: Optional[bool] = None, do_expand: bool = False,
                 do_zero_padding: bool = False, use_tma_aligned_col_major_sf: bool = False):
        x, sf = x if isinstance(x, tuple) else (x, None)
        cached = handle is not None  # the runtime takes what is not given from the handle
        stats = cumulative_local_expert_recv_stats
        with torch.profiler.record_function(_DISPATCH):
            arrays, result = self.runtime.dispatch(
                _tensors(x=x, sf=sf, topk_idx=topk_idx, topk_weights=topk_weights,
                         cumulative_local_expert_recv_stats=stats),
                handle.result if isinstance(handle, EPHandle) else handle, num_experts or 0,
                num_max_tokens_per_rank or 0, expert_alignment or 0,
                (not cached) if do_cpu_sync is None else bool(do_cpu_sync), bool(do_expand),
                bool(do_zero_padding), bool(use_tma_aligned_col_major_sf), bool(do_handle_copy))
        with torch.profiler.record_function(_DISPATCH_EPILOGUE):
            return self._dispatched(arrays, result, x, sf, topk_idx, cached, handle, do_expand,
                                    num_experts, expert_alignment, num_max_tokens_per_rank,
                                    num_sms)

    def _dispatched(self, arrays, result, x, sf, topk_idx, cached, handle, do_expand, num_experts,
                    expert_alignment, num_max_tokens_per_rank, num_sms):
        """The dispatch's results as DeepEP returns them."""
        x_dtype = x.dtype if isinstance(x, torch.Tensor) else torch.bfloat16
        recv_x: Any = _tensor(arrays["recv_x"], x_dtype)
        if "recv_sf" in arrays:
            recv_x = (recv_x, _tensor(arrays["recv_sf"], sf.dtype))  # type: ignore[union-attr]
        recv_topk_idx = torch.from_numpy(arrays["recv_topk_idx"]) \
            if "recv_topk_idx" in arrays else None
        recv_topk_weights = torch.from_numpy(arrays["recv_topk_weights"]) \
            if "recv_topk_weights" in arrays else None
        if not cached:
            kept = torch.from_numpy(arrays["topk_idx"]) if "topk_idx" in arrays else topk_idx
            handle = EPHandle(result, arrays, kept, bool(do_expand), int(num_experts or 0),
                              int(expert_alignment or 1),
                              int(num_max_tokens_per_rank or self.num_max_tokens_per_rank),
                              num_sms or self.get_theoretical_num_sms(0, 0))
        return recv_x, recv_topk_idx, recv_topk_weights, handle, EventOverlap(EventHandle())

    def combine(self, x: torch.Tensor, handle: EPHandle,
                topk_weights: Optional[torch.Tensor] = None,
                bias: Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor], None] = None,
                num_sms: int = 0, num_qps: int = 0, previous_event: Optional[EventHandle] = None,
                previous_event_before_epilogue: Optional[EventHandle] = None,
                async_with_compute_stream: bool = False, allocate_on_comm_stream: bool = False):
        bias0, bias1 = bias if isinstance(bias, tuple) else (bias, None)
        with torch.profiler.record_function(_COMBINE):
            arrays = self.runtime.combine(
                _tensors(x=x, topk_weights=topk_weights, bias0=bias0, bias1=bias1),
                handle.result if isinstance(handle, EPHandle) else handle)
        with torch.profiler.record_function(_COMBINE_EPILOGUE):
            combined_x = _tensor(arrays["combined_x"], torch.bfloat16)
            combined_w = torch.from_numpy(arrays["combined_topk_weights"]) \
                if "combined_topk_weights" in arrays else None
        return combined_x, combined_w, EventOverlap(EventHandle())


__all__ = ["ElasticBuffer", "EPHandle"]
