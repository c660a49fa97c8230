"""MoE dispatch and combine with DeepEP's names and call shapes, and the fused MegaMoE layer.

    buf = shmoe.MoeBuffer(max_tokens_per_pe, hidden, num_experts, num_topk, dtype)
    recv_x, recv_topk_idx, recv_topk_weights, counts, handle = buf.dispatch(x, topk_idx, w)
    ...                      # the local experts work on recv_x, giving y (same rows)
    combined_x = buf.combine(y, handle, w)

Every call is collective over all PEs, in the same order. Arguments are numpy arrays or CPU
torch tensors (results come back as the same kind); bfloat16 data is a torch.bfloat16 tensor or
a numpy uint16 array of bit patterns (shmoe.bfloat16 converts). A call that any PE refuses is
refused on every PE (every PE raises shmoe.Error: the refusing PE naming the argument, the others
naming that PE), so none is left waiting. The values of the routing (expert numbers
in range) are checked by the operators themselves, on every PE alike."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _shmoe
from ._arrays import (as_numpy, describe, from_numpy, is_tensor, loaded_torch, numpy_dtype,
                      torch_dtype_name)
from ._runtime import Error, add_resource, remove_resource, require_init, state, world

__all__ = ["MoeBuffer", "DispatchHandle", "MegaMoE", "quantize_mx", "dequantize_mx", "FP8_FORMATS"]

DTYPES = ("float32", "bfloat16", "float16", "int32")
FP8_FORMATS = ("e4m3", "e5m2")
MX_BLOCK = 32  # elements per E8M0 scale


# ---- Arguments ------------------------------------------------------------------------------


def _fp8_format(call, name, value):
    if value not in FP8_FORMATS:
        raise ValueError(f"{call}: {name}={value!r} is not one of {', '.join(FP8_FORMATS)}")
    return value


def _source(call, obj, param):
    """(numpy view, element type name, is a tensor) of an array argument."""
    if isinstance(obj, np.ndarray):
        return obj, obj.dtype.name, False
    if is_tensor(obj):
        if obj.device.type != "cpu":
            raise ValueError(f"{call}: {param} is on device {obj.device}; shmoe takes CPU tensors")
        name = torch_dtype_name(obj.dtype)
        if name is None:
            raise TypeError(f"{call}: {param} has dtype {obj.dtype}, which shmoe does not carry")
        return as_numpy(obj.detach()), name, True
    kinds = "a numpy.ndarray" + (" or a CPU torch.Tensor" if loaded_torch() else "")
    raise TypeError(f"{call}: {param} must be {kinds}, not {type(obj).__name__}")


def _shape(call, param, a, shape):
    """Checks a's shape against `shape`, whose entries are ints or (name, limit) for a leading
    dimension of at most `limit`."""
    if a.ndim != len(shape):
        raise ValueError(f"{call}: {param} must have {len(shape)} dimensions, not shape "
                         f"{list(a.shape)}")
    for axis, (got, want) in enumerate(zip(a.shape, shape)):
        if isinstance(want, tuple):
            name, limit = want
            if got > limit:
                raise ValueError(f"{call}: {param} has {got} rows, more than {name}={limit}")
        elif got != want:
            raise ValueError(f"{call}: {param} has shape {list(a.shape)}; dimension {axis} must "
                             f"be {want}")


def _indices(call, obj, param, shape, num_experts, *, check_range):
    """Expert indices as int32; `check_range` for a local call (a collective's operator checks
    the range itself, on every PE)."""
    a, name, _ = _source(call, obj, param)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{call}: {param} has dtype {name}; expert indices are integers")
    _shape(call, param, a, shape)
    if check_range and a.size:
        bad = (a < -1) | (a >= num_experts)
        if bad.any():
            t, k = np.argwhere(bad)[0]
            raise ValueError(f"{call}: {param}[{t}][{k}]={a[t, k]} is out of range "
                             f"(0..{num_experts - 1}, or -1 for no expert)")
    return np.ascontiguousarray(a, dtype=np.int32)


def _converted(call, shrink, convert):
    """convert(), the arguments of a collective call as the runtime takes them. A conversion that
    fails (an argument that is no array at all) joins the call's agreement as this PE's refusal,
    so the other PEs, agreeing inside the runtime, are refused too rather than left waiting (in
    shrink mode nothing is agreed: the PE raises alone and the others mask it)."""
    try:
        return convert()
    except Exception as e:
        if not shrink:
            try:
                _shmoe.agree(world(), call, str(e))
            except Error:
                pass
        raise


def _dtype_of(dtype):
    """A dtype's name: a name as given, a torch dtype's, or a numpy dtype's."""
    if isinstance(dtype, str):
        return dtype
    if loaded_torch() is not None and isinstance(dtype, loaded_torch().dtype):
        return torch_dtype_name(dtype) or str(dtype)
    try:
        return np.dtype(dtype).name
    except TypeError:
        return repr(dtype)


def _worker_pair(workers):
    """(matrix, vector) worker counts; None is (0, 0), the PE's fair share of the cores."""
    if workers is None:
        return 0, 0
    if not isinstance(workers, (tuple, list)) or len(workers) != 2:
        raise ValueError(f"shmoe.MoeBuffer: workers={workers!r} must be (matrix, vector) counts")
    return workers[0], workers[1]


def _contiguous(call, obj, param):
    """(a C-contiguous numpy view or copy of the array, its dtype's name, whether a tensor)."""
    a, name, tensor = _source(call, obj, param)
    return np.ascontiguousarray(a), name, tensor


def _float32_weights(call, obj):
    """(weights as a float32 numpy array, their dtype's name), or (None, ""); weights of another
    kind than floating point are passed as they are, for the runtime to refuse by name."""
    if obj is None:
        return None, ""
    a, name, _ = _source(call, obj, "topk_weights")
    if name == "bfloat16":
        a = (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
    elif a.dtype.kind != "f":
        return np.ascontiguousarray(a), name
    return np.ascontiguousarray(a, dtype=np.float32), name


def _expert_weights(call, name, w):
    """An expert weight argument as the runtime takes it: (values, dtype name, scales or None,
    scales' dtype name); floats other than float32 and bfloat16 become float32."""
    if isinstance(w, tuple):
        if len(w) != 2:
            raise ValueError(f"{call}: {name} must be floats or (codes, scales)")
        codes, cname, _ = _contiguous(call, w[0], f"{name}[0] (codes)")
        scales, sname, _ = _contiguous(call, w[1], f"{name}[1] (scales)")
        return codes, cname, scales, sname
    values, vname, _ = _contiguous(call, w, name)
    if values.dtype.kind == "f" and vname not in ("float32", "bfloat16"):
        values, vname = np.ascontiguousarray(values, dtype=np.float32), "float32"
    return values, vname, None, ""


def _mask_view(call, obj):
    """Shrink mode's pe_mask as the numpy view the operator writes (a tensor's own memory, so
    the caller sees the PEs the call masked), or None."""
    return None if obj is None else describe(obj, call, "pe_mask", writable=True).buffer


# ---- Dispatch and combine -------------------------------------------------------------------


class DispatchHandle:
    """What combine needs of a dispatch (its runtime's record): where each received row came
    from, and this PE's routing. `src_info` [rows, 3] holds (source PE, source token, top-k
    slot) of each row."""

    def __init__(self, buffer: "MoeBuffer", record: Any) -> None:
        self.buffer = buffer
        self.record = record
        self.num_recv_rows = record.rows
        self.src_info_all = record.src_info  # [capacity, 3]
        self.src_info = record.src_info[: record.rows]
        self.layout_prefix = record.layout_prefix  # inclusive prefix over (expert, source PE)
        self.topk_idx = record.topk_idx  # int32 [tokens, topk]
        self.topk_weights = record.topk_weights  # float32 [tokens, topk] or None

    @property
    def num_tokens(self) -> int:
        return int(self.record.num_tokens)


class MoeBuffer:
    """Dispatch and combine across all PEs (DeepEP's Buffer, for expert parallelism over PEs).

    max_tokens_per_pe: the most tokens any PE passes to one dispatch; hidden: elements per token;
    num_experts: all experts of the job, divisible by the PE count (expert e lives on PE
    e // (num_experts / n_pes)); num_topk: experts per token; dtype: float32, bfloat16, float16
    or int32 (names, numpy dtypes or torch dtypes).
    Options: double_plane (large segments go through the asynchronous copy engine),
    double_plane_threshold (bytes), fp8 ("e4m3"/"e5m2": dispatch sends MX FP8 rows with E8M0
    scales and returns recv_x as (codes, scales); needs dtype bfloat16), max_recv_rows (rows a PE
    can receive; default n_pes * max_tokens_per_pe * num_topk, which never overflows), workers
    ((matrix, vector) worker threads; default: this PE's fair share of the cores);
    token_side_bytes and header_ints (for a layer that calls .operator itself, as deep_ep does:
    bytes of its own data that travel with each token's rows, and int32 values each PE adds to
    the call's header, which every PE receives).
    shrink_timeout_ms > 0: shrink mode (elastic expert parallelism): dispatch, combine and
    sync_live take a pe_mask (int32 [n_pes], nonzero for a masked PE) and wait at most this long
    for a live PE; one that has not arrived by then is masked in pe_mask and its rows are left
    out. The calls then agree on nothing beforehand (that would wait for every PE): a PE whose
    arguments are wrong raises alone, and the others mask it. Not with fp8; the receive window
    holds a slot per (local expert, source PE, token).
    recv_blocks (0..64, not in shrink mode): receive blocks, each recv_capacity rows of symmetric
    heap: a dispatch (not zero_copy) takes a free one, the senders write their rows straight into
    it, and recv_x is those rows, no copy out of the window (shmoe_moe_config_t.recv_blocks in
    shmoe/moe.h); the block goes back when the last array over recv_x is dropped. While every
    block is held, dispatch copies as with 0 (result_counts() says how often each happened).
    A recv_x in a block outlives close() (the buffer's memory is then left allocated), not
    shmoe.finalize.
    Collective; close() (or the with block, or shmoe.finalize) frees it, collectively, or
    abandon() gives it up on this PE alone.

    The buffer is a shell over its C++ runtime (_shmoe.MoeRuntime): each method converts its
    arguments (tensors to numpy views, dtypes to names) and makes one call, which checks them,
    agrees on them with every PE and runs the operator."""

    def __init__(self, max_tokens_per_pe, hidden, num_experts, num_topk, dtype="bfloat16", *,
                 double_plane=False, double_plane_threshold=None, fp8=None, max_recv_rows=0,
                 workers=None, token_side_bytes=0, header_ints=0, shrink_timeout_ms=0,
                 recv_blocks=0):
        call = "shmoe.MoeBuffer"
        require_init(call)
        matrix, vector = _converted(call, False, lambda: _worker_pair(workers))
        self.runtime = _shmoe.MoeRuntime(
            max_tokens_per_pe, hidden, num_experts, num_topk, _dtype_of(dtype),
            bool(double_plane), 0 if double_plane_threshold is None else double_plane_threshold,
            fp8 or "", max_recv_rows, matrix, vector, token_side_bytes, header_ints,
            shrink_timeout_ms, recv_blocks)
        self.max_tokens_per_pe, self.hidden = int(max_tokens_per_pe), int(hidden)
        self.num_experts, self.num_topk = int(num_experts), int(num_topk)
        self.dtype, self.fp8 = _dtype_of(dtype), fp8
        self.double_plane = bool(double_plane)
        self.shrink = shrink_timeout_ms > 0
        self.num_local_experts = self.num_experts // state.n_pes
        # The C++ operator (the extension's binding of shmoe_moe_dispatch/shmoe_moe_combine), for
        # callers that keep their own arrays (deep_ep, the benchmarks); the runtime owns it.
        self.operator: _shmoe.MoeBuffer = self.runtime.operator
        self.recv_capacity = self.operator.recv_capacity()
        recv_op = self.runtime.fp8_operator if fp8 else self.operator
        self._row_bytes = _shmoe.mx_row_bytes(self.hidden) if fp8 else \
            self.hidden * numpy_dtype(self.dtype).itemsize
        self._window = np.frombuffer(recv_op.receive_window(), np.uint8)
        add_resource(self)

    @property
    def _closed(self):
        return self.runtime.closed

    def close(self):
        """Frees the buffer's symmetric memory and workers (collective)."""
        if not self._closed:
            remove_resource(self)
            self.runtime.close()

    def abandon(self):
        """Gives the buffer up on this PE alone, without the collective close (shrink mode, where
        some PE may never close): its symmetric memory stays allocated until the process ends,
        and shmoe.finalize no longer closes it."""
        if not self._closed:
            remove_resource(self)
            self.runtime.abandon()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _require_open(self, call):
        require_init(call)
        if self._closed:
            raise Error(f"{call}: the buffer is closed")

    def get_dispatch_layout(self, topk_idx, num_experts):
        """(num_tokens_per_pe [n_pes], is_token_in_pe [tokens, n_pes], num_tokens_per_expert
        [num_experts]) of this PE's routing; local, no communication."""
        call = "MoeBuffer.get_dispatch_layout"
        self._require_open(call)
        if num_experts != self.num_experts:
            raise ValueError(f"{call}: num_experts={num_experts} but the buffer has "
                             f"{self.num_experts} experts")
        tensor = is_tensor(topk_idx)
        idx = _indices(call, topk_idx, "topk_idx",
                       (("max_tokens_per_pe", self.max_tokens_per_pe), self.num_topk),
                       self.num_experts, check_range=True)
        routed = idx >= 0
        per_expert = np.bincount(idx[routed], minlength=self.num_experts).astype(np.int32)
        pe_of = np.where(routed, idx // self.num_local_experts, -1)
        in_pe = np.zeros((idx.shape[0], state.n_pes), dtype=bool)
        rows, cols = np.nonzero(routed)
        in_pe[rows, pe_of[rows, cols]] = True
        per_pe = in_pe.sum(axis=0, dtype=np.int32)
        return (from_numpy(per_pe, tensor), from_numpy(in_pe, tensor),
                from_numpy(per_expert, tensor))

    def dispatch(self, x, topk_idx, topk_weights=None, *, zero_copy=False, pe_mask=None):
        """Sends each token to the PEs of its top-k experts (collective).

        x: [tokens, hidden] of the buffer's dtype, tokens <= max_tokens_per_pe; topk_idx:
        [tokens, num_topk] expert numbers (-1: no expert); topk_weights: [tokens, num_topk]
        floats or None. Returns (recv_x, recv_topk_idx, recv_topk_weights,
        num_recv_tokens_per_expert_list, handle): recv_x [rows, hidden] grouped by local expert,
        then source PE, then token ((codes, scales) with fp8); recv_topk_idx[r] the local expert
        of row r; recv_topk_weights[r] its weight (None without topk_weights).
        zero_copy: recv_x is a view of the buffer's receive window, where the rows landed, rather
        than a copy (as DeepEP's low-latency mode): valid until the next dispatch or close on this
        buffer (the contract: shmoe_moe_receive_window in shmoe/moe.h). The experts may write
        their outputs into it in place and pass it to combine as y; when every PE does so, each
        PE's reduction reads its tokens' rows where they lie.
        pe_mask: shrink mode's (required there): the rows of masked PEs are left out, and PEs
        that miss the bound are masked in it. Not with zero_copy."""
        call = "MoeBuffer.dispatch"
        self._require_open(call)

        def convert():
            xs, x_dtype, tensor = _contiguous(call, x, "x")
            idx, idx_dtype, _ = _contiguous(call, topk_idx, "topk_idx")
            w, w_dtype = _float32_weights(call, topk_weights)
            return xs, x_dtype, tensor, idx, idx_dtype, w, w_dtype, _mask_view(call, pe_mask)

        xs, x_dtype, tensor, idx, idx_dtype, w, w_dtype, mask = _converted(call, self.shrink,
                                                                           convert)
        rows, recv, src_info, layout_prefix, counts, scales, record = self.runtime.dispatch(
            xs, x_dtype, idx, idx_dtype, w, w_dtype, bool(zero_copy), mask)
        if self.fp8:
            received = recv[: rows * self._row_bytes].reshape(rows, self._row_bytes)
            blocks = -(-self.hidden // MX_BLOCK)
            recv_x = (from_numpy(received[:, : self.hidden], tensor),
                      from_numpy(received[:, self.hidden : self.hidden + blocks], tensor))
        else:
            received = recv.view(numpy_dtype(self.dtype))[: rows * self.hidden]
            recv_x = from_numpy(received.reshape(rows, self.hidden), tensor, self.dtype)
        recv_idx = np.repeat(np.arange(self.num_local_experts, dtype=np.int64), counts)
        recv_w = None if w is None else from_numpy(scales[:rows], tensor)
        handle = DispatchHandle(self, record)
        return recv_x, from_numpy(recv_idx, tensor), recv_w, counts.tolist(), handle

    def combine(self, y, handle, topk_weights=None, *, pe_mask=None):
        """Brings the experts' outputs back to the tokens' PEs and sums them (collective):
        combined_x[t] = sum over k of topk_weights[t, k] * y[row of (t, k)], in fp32 in
        increasing k, rounded once to the dtype. y: [rows, hidden] of the buffer's dtype, in
        recv_x's order; topk_weights: [tokens, num_topk], default the dispatch's. handle may come
        from another open buffer with the same experts, top-k and capacity (rows dispatched in
        FP8, say, and combined in BF16). pe_mask: shrink mode's (required there): the terms of
        experts on masked PEs are left out of the sums; handle must then be the last dispatch's
        of this buffer."""
        call = "MoeBuffer.combine"
        self._require_open(call)

        def convert():
            ys, y_dtype, tensor = _contiguous(call, y, "y")
            w, w_dtype = _float32_weights(call, topk_weights)
            return ys, y_dtype, tensor, w, w_dtype, _mask_view(call, pe_mask)

        ys, y_dtype, tensor, w, w_dtype, mask = _converted(call, self.shrink, convert)
        record = handle.record if isinstance(handle, DispatchHandle) else None
        out = self.runtime.combine(ys, y_dtype, record, w, w_dtype, mask)
        return from_numpy(out, tensor, self.dtype)

    def sync_live(self, pe_mask):
        """Shrink mode: a barrier of the PEs pe_mask has live; those that do not arrive within
        shrink_timeout_ms are masked in it (collective over the live PEs)."""
        call = "MoeBuffer.sync_live"
        self._require_open(call)
        if not self.shrink:
            raise ValueError(f"{call}: the buffer is not in shrink mode (shrink_timeout_ms=0)")
        self.operator.sync_live(_mask_view(call, pe_mask))

    def rejoin(self, pe_mask, others=()):
        """Shrink mode: a barrier of every PE, masked or not (collective over all PEs, which make
        the same rejoins): those that arrive within shrink_timeout_ms are unmasked in pe_mask
        and go on, with the shrink-mode MoeBuffers in `others` (at most 31, the same on every
        PE), from the same call counters; the others are masked. For a PE that was masked and is
        back (a stopped PE that resumed)."""
        call = "MoeBuffer.rejoin"
        self._require_open(call)
        if not self.shrink:
            raise ValueError(f"{call}: the buffer is not in shrink mode (shrink_timeout_ms=0)")
        others = list(others)
        for i, o in enumerate(others):
            if not isinstance(o, MoeBuffer) or not o.shrink:
                raise ValueError(f"{call}: others[{i}]={o!r} is not a shrink-mode MoeBuffer")
            o._require_open(call)
        self.operator.rejoin(_mask_view(call, pe_mask), [o.operator for o in others])

    @property
    def receive_window(self) -> np.ndarray:
        """The bytes of this PE's receive window (recv_capacity rows), where a zero_copy
        dispatch's rows land. Rows of the buffer's dtype written here and passed to combine as y,
        by every PE, are read where they lie instead of being sent."""
        return self._window

    def result_counts(self):
        """(dispatches whose recv_x is a receive block the senders wrote, dispatches that copied
        it out of the window), on this PE; zero_copy dispatches count in neither."""
        return tuple(self.runtime.result_counts())

    def last_timing(self):
        """What the last dispatch or combine measured on this PE: worker_us, comm_us,
        bytes_sent, bytes_via_copy_engine."""
        self._require_open("MoeBuffer.last_timing")
        return self.operator.last_timing()

    def last_source_waits(self):
        """float64 [n_pes]: how long (us) the last dispatch or combine waited on this PE for
        each PE's flags, this PE's row of the wait matrix that names a slow PE."""
        self._require_open("MoeBuffer.last_source_waits")
        return self.operator.last_source_waits()


# ---- MX FP8 ---------------------------------------------------------------------------------


def quantize_mx(x, mode):
    """OCP MX FP8 of the float values `x` (last axis in blocks of 32): (codes uint8, same shape;
    scales uint8 E8M0, [..., ceil(n / 32)]). As tensors if x is one."""
    call = "shmoe.moe.quantize_mx"
    mode = _fp8_format(call, "mode", mode)
    a, name, tensor = _source(call, x, "x")
    if name == "bfloat16":
        a = (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
    elif a.dtype.kind != "f":
        raise TypeError(f"{call}: x has dtype {name}; MX quantizes floating point values")
    if a.ndim < 1 or a.shape[-1] < 1:
        raise ValueError(f"{call}: x has shape {list(a.shape)}; it needs a last axis of at least 1")
    n = a.shape[-1]
    flat = np.ascontiguousarray(a, dtype=np.float32).reshape(-1, n)
    rows = _mx_rows(flat, mode)
    blocks = -(-n // MX_BLOCK)
    codes = np.ascontiguousarray(rows[:, :n]).reshape(a.shape)
    scales = np.ascontiguousarray(rows[:, n : n + blocks]).reshape(*a.shape[:-1], blocks)
    return from_numpy(codes, tensor), from_numpy(scales, tensor)


def dequantize_mx(codes, scales, mode):
    """The float32 values of MX FP8 codes and their E8M0 scales (exact)."""
    call = "shmoe.moe.dequantize_mx"
    mode = _fp8_format(call, "mode", mode)
    c, cname, tensor = _source(call, codes, "codes")
    s, sname, _ = _source(call, scales, "scales")
    if cname != "uint8" or sname != "uint8":
        raise TypeError(f"{call}: codes and scales must be uint8, not {cname} and {sname}")
    n = c.shape[-1] if c.ndim else 0
    blocks = -(-n // MX_BLOCK)
    if c.ndim < 1 or s.shape != (*c.shape[:-1], blocks):
        raise ValueError(f"{call}: scales has shape {list(s.shape)}; codes of shape "
                         f"{list(c.shape)} need {[*c.shape[:-1], blocks]}")
    row = _shmoe.mx_row_bytes(n)
    rows = np.zeros((c.size // n, row), np.uint8)
    rows[:, :n] = c.reshape(-1, n)
    rows[:, n : n + blocks] = s.reshape(-1, blocks)
    out = np.empty((rows.shape[0], n), np.float32)
    _shmoe.dequantize_mx_rows(rows, rows.shape[0], n, mode, out)
    return from_numpy(out.reshape(c.shape), tensor)


def _mx_rows(values, mode):
    """float32 [rows, n] -> the operators' MX row layout: [rows, mx_row_bytes(n)] uint8."""
    n = values.shape[1]
    rows = np.zeros((values.shape[0], _shmoe.mx_row_bytes(n)), np.uint8)
    _shmoe.quantize_mx_rows(values, values.shape[0], n, mode, False, rows)
    return rows


# ---- MegaMoE --------------------------------------------------------------------------------


class MegaMoE:
    """A whole MoE layer (route, dispatch, MX FP8 quantization, GEMM1, SwiGLU, GEMM2, combine) as
    one operator launch on each PE.

    max_tokens_per_pe: the most tokens any PE passes; hidden, intermediate_hidden (even: SwiGLU
    splits GEMM1's output into gate and up halves); num_experts (divisible by the PE count),
    num_topk; mode: "e4m3" or "e5m2". Options: max_recv_rows, workers ((matrix, vector), vector = 2 x
    matrix), wave_rows (rows per GEMM tile; 0: 512 where one thread runs a wave's GEMMs, 128
    where workers hand waves to each other), weights: how the experts' weights are kept, "fp8" (the codes and
    scales, 1.03 bytes per parameter, read directly: faster where an expert gets up to about 4
    rows a call), "bf16" (expanded and packed for oneDNN: faster from about 8) or "auto" (fp8
    where max_tokens_per_pe * num_topk <= 4 * the experts per PE). load_weights (collective) gives this PE's
    experts; then
    layer(x, topk_idx, topk_weights) (collective) returns the layer's output. Creating it is
    collective too (the PEs agree on its arguments)."""

    def __init__(self, max_tokens_per_pe, hidden, intermediate_hidden, num_experts, num_topk,
                 mode="e4m3", *, max_recv_rows=0, workers=None, wave_rows=0, weights="auto"):
        call = "shmoe.MegaMoE"
        require_init(call)
        matrix, vector = _converted(call, False, lambda: _worker_pair(workers))
        self.runtime = _shmoe.MegaRuntime(max_tokens_per_pe, hidden, intermediate_hidden,
                                          num_experts, num_topk, str(mode), max_recv_rows, matrix,
                                          vector, wave_rows, str(weights))
        self.max_tokens_per_pe, self.hidden = int(max_tokens_per_pe), int(hidden)
        self.intermediate_hidden = int(intermediate_hidden)
        self.num_experts, self.num_topk = int(num_experts), int(num_topk)
        self.mode, self.wave_rows, self.weights = mode, int(wave_rows), weights
        self.num_local_experts = self.runtime.num_local_experts
        self.last_num_recv_tokens_per_expert = None
        add_resource(self)

    def load_weights(self, w1, w2):
        """This PE's experts (collective): w1 [L, intermediate_hidden, hidden] (GEMM1:
        h = x @ w1[e].T, gate then up halves), w2 [L, hidden, intermediate_hidden / 2] (GEMM2:
        y = act @ w2[e].T), as floats (quantized to MX FP8 of the layer's mode) or as
        (codes, scales) uint8."""
        call = "MegaMoE.load_weights"
        require_init(call)
        converted = _converted(call, False, lambda: (*_expert_weights(call, "w1", w1),
                                                     *_expert_weights(call, "w2", w2)))
        self.runtime.load_weights(*converted)

    def __call__(self, x, topk_idx, topk_weights, *, fused=True):
        """The layer's output y [num_tokens, hidden] bfloat16 for x [num_tokens, hidden] bfloat16
        (collective). fused=False runs the unfused chain (same bits)."""
        call = "MegaMoE.__call__"
        require_init(call)

        def convert():
            xs, x_dtype, tensor = _contiguous(call, x, "x")
            idx, idx_dtype, _ = _contiguous(call, topk_idx, "topk_idx")
            w, w_dtype = _float32_weights(call, topk_weights)
            if w is None:
                raise TypeError(f"{call}: topk_weights is None; the layer needs the weights")
            return xs, x_dtype, tensor, idx, idx_dtype, w, "float32" if w.dtype.kind == "f" \
                else w_dtype

        xs, x_dtype, tensor, idx, idx_dtype, w, w_dtype = _converted(call, False, convert)
        y, counts = self.runtime.run(xs, x_dtype, idx, idx_dtype, w, w_dtype, bool(fused))
        self.last_num_recv_tokens_per_expert = counts.tolist()
        return from_numpy(y, tensor, "bfloat16")

    def last_kernel_us(self):
        return self.runtime.last_kernel_us()

    def close(self):
        """Frees the layer's symmetric memory and workers (collective)."""
        remove_resource(self)
        self.runtime.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
