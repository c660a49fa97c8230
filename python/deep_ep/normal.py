"""DeepEP's normal (intranode) mode on shmoe.

The runtime is shmoe's IntranodeBuffer (shmoe/deep_ep.h, bound as _shmoe.IntranodeBuffer), which
checks every argument, on every rank, keeps the operators (resized, on every rank at once, when a
call needs more) and does the work; each method here converts torch tensors to arrays and back
and makes one runtime call."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import torch

from shmoe import _shmoe

from .elastic import _tensor, _tensors


class Handle(tuple):
    """DeepEP's handle, with the runtime's result, whose record of the routing combine and a
    cached dispatch use. On one host its intranode 6 parts (rank_prefix_matrix,
    channel_prefix_matrix, recv_channel_prefix_matrix, recv_src_idx, is_token_in_rank,
    send_head); over several hosts its internode 10 (is_token_in_rank,
    rdma_channel_prefix_matrix, gbl_channel_prefix_matrix, recv_rdma_channel_prefix_matrix,
    recv_rdma_rank_prefix_sum, recv_gbl_channel_prefix_matrix, recv_gbl_rank_prefix_sum,
    recv_src_meta, send_rdma_head, send_nvl_head), shmoe/deep_ep.h says what each holds."""

    result: Any


def _handle(arrays: Any, is_token_in_rank: torch.Tensor, result: Any) -> Handle:
    get = lambda name: torch.from_numpy(arrays[name])  # noqa: E731
    parts: Tuple[torch.Tensor, ...]
    if "recv_gbl_rank_prefix_sum" in arrays:  # more than one host
        parts = (is_token_in_rank, get("rdma_channel_prefix_matrix"),
                 get("channel_prefix_matrix"), get("recv_rdma_channel_prefix_matrix"),
                 get("recv_rdma_rank_prefix_sum"), get("recv_channel_prefix_matrix"),
                 get("recv_gbl_rank_prefix_sum"), get("recv_src_meta"), get("send_rdma_head"),
                 get("send_head"))
    else:
        parts = (get("rank_prefix_matrix"), get("channel_prefix_matrix"),
                 get("recv_channel_prefix_matrix"), get("recv_src_idx"), is_token_in_rank,
                 get("send_head"))
    handle = Handle(parts)
    handle.result = result
    return handle


def _received(arrays: Any, x: Any) -> Any:
    """recv_x as DeepEP returns it: a tensor of x's dtype, or for an (x, scales) pair a pair."""
    if isinstance(x, tuple):
        return (_tensor(arrays["recv_x"], x[0].dtype),
                _tensor(arrays["recv_x_scales"], x[1].dtype))
    return _tensor(arrays["recv_x"], x.dtype)


def _result(handle: Any) -> Any:
    """What the runtime takes as the handle: the result of a Handle, anything else as it is (the
    runtime refuses it, naming handle)."""
    return handle.result if isinstance(handle, Handle) else handle


class Normal:
    """The normal-mode half of a deep_ep.Buffer."""

    def __init__(self) -> None:
        self.runtime: Any = _shmoe.IntranodeBuffer()

    def close(self, abandon: bool = False) -> None:
        """Frees the operators, collectively; with abandon on this rank alone (shrink mode, where
        some rank may never call this)."""
        if self.runtime is not None:
            self.runtime.abandon() if abandon else self.runtime.destroy()
            self.runtime = None

    def layout(self, topk_idx, num_experts):
        """(num_tokens_per_rank int32 [ranks], num_tokens_per_rdma_rank int32 [hosts] or None on
        one host, num_tokens_per_expert int32 [experts], is_token_in_rank bool [tokens, ranks])
        of this rank's routing; local."""
        arrays = self.runtime.get_dispatch_layout(_tensors(topk_idx=topk_idx), num_experts)
        per_host = arrays.get("num_tokens_per_rdma_rank")
        return (torch.from_numpy(arrays["num_tokens_per_rank"]),
                None if per_host is None else torch.from_numpy(per_host),
                torch.from_numpy(arrays["num_tokens_per_expert"]),
                torch.from_numpy(arrays["is_token_in_rank"]))

    def dispatch(self, x, num_tokens_per_rank, num_tokens_per_rdma_rank, is_token_in_rank,
                 num_tokens_per_expert, topk_idx, topk_weights, expert_alignment,
                 num_worst_tokens):
        xs, scales = x if isinstance(x, tuple) else (x, None)
        arrays, result = self.runtime.dispatch(
            _tensors(x=xs, x_scales=scales, num_tokens_per_rank=num_tokens_per_rank,
                     num_tokens_per_rdma_rank=num_tokens_per_rdma_rank,
                     is_token_in_rank=is_token_in_rank,
                     num_tokens_per_expert=num_tokens_per_expert, topk_idx=topk_idx,
                     topk_weights=topk_weights), None, expert_alignment, num_worst_tokens)
        recv_topk_idx = recv_topk_weights = None
        if "recv_topk_idx" in arrays:
            recv_topk_idx = torch.from_numpy(arrays["recv_topk_idx"])
            recv_topk_weights = torch.from_numpy(arrays["recv_topk_weights"])
        num_recv: List[int] = arrays["num_recv_tokens_per_expert"].tolist()
        return (_received(arrays, x), recv_topk_idx, recv_topk_weights, num_recv,
                _handle(arrays, is_token_in_rank, result))

    def cached_dispatch(self, x, handle, topk_idx, topk_weights) -> Any:
        xs, scales = x if isinstance(x, tuple) else (x, None)
        arrays, _ = self.runtime.dispatch(
            _tensors(x=xs, x_scales=scales, topk_idx=topk_idx, topk_weights=topk_weights),
            _result(handle), 0, 0)
        return _received(arrays, x)

    def combine(self, x, handle, topk_weights, bias):
        biases = bias if isinstance(bias, tuple) else (() if bias is None else (bias,))
        named = dict(zip(("bias0", "bias1"), biases))
        arrays = self.runtime.combine(_tensors(x=x, topk_weights=topk_weights, **named),
                                      _result(handle), len(biases))
        combined = _tensor(arrays["combined_x"], torch.bfloat16)
        combined_w: Optional[torch.Tensor] = None
        if "combined_topk_weights" in arrays:
            combined_w = torch.from_numpy(arrays["combined_topk_weights"])
        return combined, combined_w
