"""DeepEP V2's ElasticBuffer primitives beside dispatch and combine, on CPU tensors: pipeline
parallelism between ring neighbours (PP), all-gather sessions (AGRS) and Engram's remote storage.

ElasticBuffer (elastic.py) inherits these methods. The runtime is shmoe's
(shmoe/elastic_primitives.h, methods of _shmoe.ElasticBuffer), which checks every argument and
does the work; each method here converts tensors and makes one runtime call. Each primitive keeps
its own symmetric memory, made by its configuration call (pp_set_config, agrs_set_config,
engram_write) and freed with the buffer (destroy). Profiler rows carry DeepEP's kernel names where
its tests time them (send_impl, recv_impl, engram_fetch_impl, engram_fetch_wait_impl).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Union, cast

import torch
import torch.distributed as dist

from shmoe import _shmoe

Shape = Union[Tuple[int, ...], torch.Size]
Shapes = Union[Shape, Sequence[Shape]]

_VIEWS = {torch.bfloat16: torch.int16, torch.float8_e4m3fn: torch.uint8}


def _pair(t: Any, name: str) -> Tuple[Any, str]:
    """(a numpy view of t's own memory, t's dtype name), never a copy: the runtime refuses a
    tensor that is not contiguous, or anything that is not a tensor, naming `name`."""
    if not isinstance(t, torch.Tensor):
        return t, type(t).__name__
    t = t.detach()
    return t.view(_VIEWS.get(t.dtype, t.dtype)).numpy(), str(t.dtype).removeprefix("torch.")


def _bytes(t: Any, name: str) -> Tuple[Any, str]:
    """t's bytes (PP and AGRS move any dtype), as _pair gives them."""
    if isinstance(t, torch.Tensor) and t.is_contiguous():
        return t.detach().reshape(-1).view(torch.uint8).numpy(), "uint8"
    return _pair(t, name)


def _from_runtime(a: Any, dtype: torch.dtype) -> torch.Tensor:
    t = torch.from_numpy(a)
    return t.view(dtype) if dtype in _VIEWS else t


def _batched(shapes: Shapes) -> bool:
    return isinstance(shapes[0], (tuple, list, torch.Size))  # type: ignore[index]


def _shape_list(shapes: Shapes) -> List[Shape]:
    """The shapes of a batched call, or the one shape as a list of one."""
    return list(cast(Sequence[Shape], shapes)) if _batched(shapes) else [cast(Shape, shapes)]


def _nbytes(shape: Shape, dtype: torch.dtype) -> int:
    return math.prod(shape) * dtype.itemsize


class ElasticPrimitives:
    """PP, AGRS and Engram on an ElasticBuffer (its `runtime` and `rank_idx`)."""

    runtime: Any

    # ---- Size hints -----------------------------------------------------------------------------

    @staticmethod
    def get_pp_buffer_size_hint(num_max_tensor_bytes: int, num_max_inflight_tensors: int) -> int:
        """The buffer bytes (a multiple of 2 MiB) PP of these settings needs."""
        return int(_shmoe.elastic_pp_buffer_size_hint(num_max_tensor_bytes,
                                                      num_max_inflight_tensors))

    @staticmethod
    def get_agrs_num_max_session_bytes(group: "dist.ProcessGroup", shapes: Shapes,
                                       dtype: torch.dtype) -> int:
        """The session bytes all-gathers of tensors of `shapes` (one shape or several) take."""
        return int(_shmoe.elastic_agrs_session_bytes(
            group.size(), [_nbytes(s, dtype) for s in _shape_list(shapes)]))

    @staticmethod
    def get_agrs_buffer_size_hint(group: "dist.ProcessGroup", num_max_session_bytes: int) -> int:
        """The buffer bytes (a multiple of 2 MiB) sessions of num_max_session_bytes need."""
        return int(_shmoe.elastic_agrs_buffer_size_hint(num_max_session_bytes))

    @staticmethod
    def get_engram_storage_size_hint(num_entries: int, hidden: int, num_max_tokens_per_rank: int,
                                     dtype: torch.dtype = torch.bfloat16) -> Tuple[int, int]:
        """(receive area, storage) bytes, each a multiple of 2 MiB, as DeepEP sizes them: its
        buffer takes num_bytes=their sum and num_cpu_bytes=the storage."""
        return tuple(_shmoe.elastic_engram_storage_size_hint(  # type: ignore[return-value]
            num_entries, hidden, num_max_tokens_per_rank, dtype.itemsize))

    # ---- PP -------------------------------------------------------------------------------------

    def pp_set_config(self, num_max_tensor_bytes: int, num_max_inflight_tensors: int) -> None:
        """Collective: PP of tensors of at most num_max_tensor_bytes, num_max_inflight_tensors of
        them on their way to each neighbour at once."""
        self.runtime.pp_set_config(num_max_tensor_bytes, num_max_inflight_tensors)

    def pp_send(self, t: torch.Tensor, dst_rank_idx: int, num_sms: int = 0) -> None:
        """Sends t to dst_rank_idx, the previous or next rank of the ring; waits only for a free
        slot there, never for the receive."""
        with torch.profiler.record_function("send_impl"):
            self.runtime.pp_send(_bytes(t, "t"), dst_rank_idx)

    def pp_recv(self, t: torch.Tensor, src_rank_idx: int, num_sms: int = 0) -> None:
        """Receives src_rank_idx's next tensor into t (contiguous, the bytes that were sent)."""
        with torch.profiler.record_function("recv_impl"):
            self.runtime.pp_recv(_bytes(t, "t"), src_rank_idx)

    # ---- AGRS -----------------------------------------------------------------------------------

    def agrs_set_config(self, num_max_session_bytes: int,
                        num_max_all_gathers_per_session: int) -> None:
        """Collective, outside a session: sessions of at most num_max_session_bytes and
        num_max_all_gathers_per_session all_gather calls (at most 32)."""
        self.runtime.agrs_set_config(num_max_session_bytes, num_max_all_gathers_per_session)

    def create_agrs_session(self) -> None:
        self.runtime.create_agrs_session()

    def destroy_agrs_session(self) -> None:
        """Collective: ends the session once every rank has; its gathered tensors go with it."""
        self.runtime.destroy_agrs_session()

    @contextmanager
    def agrs_new_session(self, enabled: bool = True) -> Iterator[None]:
        """A session around the block (nothing when not enabled)."""
        if not enabled:
            yield
            return
        self.runtime.create_agrs_session()
        try:
            yield
        finally:
            self.runtime.destroy_agrs_session()

    def agrs_get_inplace_tensor(self, shapes: Shapes, dtype: torch.dtype
                                ) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
        """This rank's places in the next all_gather's output: tensors written here are gathered
        without a copy. One tensor for one shape, a tuple for several."""
        listed = _shape_list(shapes)
        places = self.runtime.agrs_get_inplace_tensor([_nbytes(s, dtype) for s in listed])
        out = tuple(torch.from_numpy(p).view(dtype).view(tuple(s))
                    for p, s in zip(places, listed, strict=True))
        return out if _batched(shapes) else out[0]

    def all_gather(self, t: Union[torch.Tensor, Sequence[torch.Tensor]]) -> Any:
        """Gathers t (or each of several tensors) from every rank, inside a session: returns
        (gathered, handle), or (*gathered, handle) for several; gathered has a leading dimension
        of num_ranks, and holds every rank's data once handle() has returned."""
        single = isinstance(t, torch.Tensor)
        tensors = (t,) if single else tuple(t)  # type: ignore[arg-type]
        regions, (session, call) = self.runtime.all_gather(
            [_bytes(x, "t") for x in tensors])
        gathered = [torch.from_numpy(r).view(x.dtype).view(-1, *x.shape)
                    for r, x in zip(regions, tensors, strict=True)]
        runtime = self.runtime

        def handle() -> None:
            runtime.agrs_wait(session, call)

        return (gathered[0], handle) if single else (*gathered, handle)

    # ---- Engram ---------------------------------------------------------------------------------

    def engram_write(self, storage: torch.Tensor, sf: Optional[torch.Tensor] = None) -> None:
        """Collective: this rank's entries ([num_entries, hidden], bfloat16 or float8_e4m3fn,
        the same shape on every rank), with every entry's scales (sf, float32 or int32
        [num_ranks * num_entries, num_sf_packs]) in FP8 mode."""
        named = {"storage": storage, "sf": sf}
        self.runtime.engram_write({k: _pair(v, k) for k, v in named.items() if v is not None})

    def engram_fetch(self, indices: torch.Tensor, num_qps: int = 0,
                     use_tma_aligned_col_major_sf: bool = False
                     ) -> Callable[[], Tuple[torch.Tensor, Optional[torch.Tensor]]]:
        """Starts fetching the entries indices (int32 [num_tokens, num_entries_per_token]) names;
        returns a hook that waits for them and returns (data, sf): data [num_tokens,
        num_entries_per_token * hidden] in the storage's dtype, sf the entries' scales [num_tokens,
        num_entries_per_token * num_sf_packs] in FP8 mode (column-major with
        use_tma_aligned_col_major_sf), else None."""
        with torch.profiler.record_function("engram_fetch_impl"):
            fetched = self.runtime.engram_fetch(_pair(indices, "indices"),
                                                bool(use_tma_aligned_col_major_sf))
        runtime = self.runtime

        def hook() -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
            with torch.profiler.record_function("engram_fetch_wait_impl"):
                arrays = runtime.engram_fetch_wait(fetched)
                fp8 = arrays["data"].dtype.itemsize == 1
                data = _from_runtime(arrays["data"], torch.float8_e4m3fn if fp8 else torch.bfloat16)
                sf = torch.from_numpy(arrays["sf"]) if "sf" in arrays else None
            return data, sf

        return hook


__all__ = ["ElasticPrimitives"]
